/*
 * shard_parse.c - a statement's sharding keys, read from libpg_query's
 * parse tree (see shard_parse.h for the contract and for why protobuf).
 *
 * Owns the result it fills and, while it runs, libpg_query's tree; reads
 * the caller's keys and asks the caller's catalog callback. The tree is
 * read two ways: the statement's own FROM items, WHERE conjunction and
 * INSERT rows by their types, and everything else (subqueries, CTEs,
 * functions) by a generic walk over protobuf-c's descriptors, bounded in
 * depth.
 */
#include "common.h"
#include "shard_parse.h"
#include "config_shard.h"
#include "sql_lex.h"

#include <stdarg.h>
#include <pg_query.h>
#include <pg_query/pg_query.pb-c.h>

/*
 * The depth bound read from tokens: a token nests the tree at most a
 * level or two (an operator chain, NOT, a cast), a bracket, CASE or
 * subquery up to NEST_WEIGHT; AND, OR, commas and CASE arms make flat
 * lists. protobuf-c's unpack overflowed 8 MB near 10,000 levels; this
 * allows at most about 2,000.
 */
#define DEPTH_BUDGET 1000
#define NEST_WEIGHT 8
#define NEST_MAX (DEPTH_BUDGET / NEST_WEIGHT)
/* The generic walk's own bound (messages deep). */
#define WALK_MAX_DEPTH 4000
/* Tables in one statement's own FROM (joins), and CTE names. */
#define MAX_TABLES 64
#define MAX_CTES 64

bool shard_parse_too_deep(const char *sql, size_t len)
{
	struct sql_lexer lx;
	struct sql_token tok;
	unsigned saved[NEST_MAX + 1];
	unsigned depth = 0, run = 0, enclosing = 0;
	sql_lex_init(&lx, sql, len, true);
	while (sql_lex_next(&lx, &tok) != SQL_TOKEN_END) {
		bool open = sql_token_is_char(&tok, '(') || sql_token_is_char(&tok, '[') || sql_token_is(&tok, "case");
		bool close = sql_token_is_char(&tok, ')') || sql_token_is_char(&tok, ']') || sql_token_is(&tok, "end");
		if (open) {
			if (depth == NEST_MAX)
				return true;
			saved[depth++] = run;
			enclosing += run;
			run = 0;
		} else if (close && depth > 0) {
			run = saved[--depth];
			enclosing -= run;
		} else if (sql_token_is_char(&tok, ',') || tok.kind == SQL_TOKEN_SEMICOLON || sql_token_is(&tok, "and") ||
			   sql_token_is(&tok, "or") || sql_token_is(&tok, "when") || sql_token_is(&tok, "then") ||
			   sql_token_is(&tok, "else")) {
			run = 0;
		} else {
			run++;
		}
		if (enclosing + run + depth * NEST_WEIGHT > DEPTH_BUDGET)
			return true;
	}
	return false;
}

struct table_ref {
	const PgQuery__RangeVar *rv;
	const char *name;	/* its alias, else its relname */
	const char *key;	/* its key column; NULL: not sharded */
	int parent;		/* union-find: tables joined on their keys share a root */
};

struct analysis {
	const struct shard_config *keys;
	shard_column_position_fn column_position;
	void *arg;
	struct shard_parse_result *out;
	struct table_ref tables[MAX_TABLES];
	int n_tables;
	const char *ctes[MAX_CTES];
	int n_ctes;
	int *value_table;	/* beside out->values: the table each value restricts */
	int values_cap;		/* room in out->values and value_table */
	const char *nested_what;	/* how a sharded table out of the statement's own FROM is named in a refusal */
	const PgQuery__RangeVar *into;	/* SELECT INTO's new table: no table to look up */
};

static void refuse(struct analysis *a, const char *fmt, ...) PRINTF_LIKE(2, 3);
static void refuse(struct analysis *a, const char *fmt, ...)
{
	va_list ap;
	if (a->out->verdict == SHARD_PARSE_REFUSED)
		return;		/* the first reason stands */
	a->out->verdict = SHARD_PARSE_REFUSED;
	va_start(ap, fmt);
	vsnprintf(a->out->reason, sizeof(a->out->reason), fmt, ap);
	va_end(ap);
}

static bool refused(const struct analysis *a)
{
	return a->out->verdict == SHARD_PARSE_REFUSED;
}

static void cross_shard(struct analysis *a, const char *what)
{
	if (!a->out->cross_shard[0])
		snprintf(a->out->cross_shard, sizeof(a->out->cross_shard), "%s", what);
}

static bool is_cte(const struct analysis *a, const PgQuery__RangeVar *rv)
{
	if (rv->schemaname && rv->schemaname[0])
		return false;
	for (int i = 0; i < a->n_ctes; i++)
		if (strcmp(a->ctes[i], rv->relname) == 0)
			return true;
	return false;
}

/* The table's key column (from sharding_key, the catalog for bare columns), or NULL. */
static const char *key_column(struct analysis *a, const PgQuery__RangeVar *rv)
{
	const struct shard_config *sc = a->keys;
	const char *schema = rv->schemaname && rv->schemaname[0] ? rv->schemaname : NULL;
	for (int i = 0; i < sc->key_count; i++)
		if (sc->keys[i].table[0] && strcmp(sc->keys[i].table, rv->relname) == 0)
			return sc->keys[i].column;
	for (int i = 0; i < sc->key_count; i++) {
		if (sc->keys[i].table[0])
			continue;
		int pos = a->column_position ? a->column_position(a->arg, schema, rv->relname, sc->keys[i].column) : -2;
		if (pos >= 0)
			return sc->keys[i].column;
		if (pos == -2) {
			refuse(a, "table \"%.63s\" is not known, so whether it has the sharding key column \"%.63s\" is not",
			       rv->relname, sc->keys[i].column);
			return NULL;
		}
	}
	return NULL;
}

static int find_root(struct analysis *a, int t)
{
	while (a->tables[t].parent != t)
		t = a->tables[t].parent = a->tables[a->tables[t].parent].parent;
	return t;
}

static void add_table(struct analysis *a, const PgQuery__RangeVar *rv)
{
	if (is_cte(a, rv))
		return;
	if (a->n_tables == MAX_TABLES) {
		refuse(a, "more than %d tables in one statement", MAX_TABLES);
		return;
	}
	struct table_ref *t = &a->tables[a->n_tables];
	t->rv = rv;
	t->name = rv->alias && rv->alias->aliasname ? rv->alias->aliasname : rv->relname;
	t->key = key_column(a, rv);
	t->parent = a->n_tables++;
}

/* ------------------------------------------------------------------ values and keys */

/* A constant, a parameter or NULL (casts looked through) into v; false if node is none of them. */
static bool value_of(const PgQuery__Node *node, struct shard_value *v)
{
	char buf[16];
	memset(v, 0, sizeof(*v));
	if (!node)
		return false;
	switch (node->node_case) {
	case PG_QUERY__NODE__NODE_TYPE_CAST:
		return value_of(node->type_cast->arg, v);
	case PG_QUERY__NODE__NODE_PARAM_REF:
		v->kind = SHARD_VALUE_PARAM;
		v->param = node->param_ref->number;
		return true;
	case PG_QUERY__NODE__NODE_A_CONST: {
		const PgQuery__AConst *c = node->a_const;
		if (c->isnull) {
			v->kind = SHARD_VALUE_NULL;
			return true;
		}
		v->kind = SHARD_VALUE_CONST;
		if (c->val_case == PG_QUERY__A__CONST__VAL_IVAL) {
			snprintf(buf, sizeof(buf), "%d", (int)(c->ival ? c->ival->ival : 0));
			v->text = xstrdup(buf);
		} else if (c->val_case == PG_QUERY__A__CONST__VAL_FVAL && c->fval->fval) {
			v->text = xstrdup(c->fval->fval);	/* digits too many for int4, or a decimal */
		} else if (c->val_case == PG_QUERY__A__CONST__VAL_SVAL && c->sval->sval) {
			v->text = xstrdup(c->sval->sval);
		} else {
			return false;	/* booleans, bit strings: no key type */
		}
		return true;
	}
	default:
		return false;
	}
}

static const char *string_field(const PgQuery__Node *node)
{
	return node && node->node_case == PG_QUERY__NODE__NODE_STRING && node->string->sval ? node->string->sval : NULL;
}

/* The table (index) whose key column node names, or -1. */
static int key_of_column(struct analysis *a, const PgQuery__Node *node)
{
	if (!node || node->node_case != PG_QUERY__NODE__NODE_COLUMN_REF)
		return -1;
	const PgQuery__ColumnRef *ref = node->column_ref;
	if (ref->n_fields < 1 || ref->n_fields > 3)
		return -1;
	const char *column = string_field(ref->fields[ref->n_fields - 1]);
	const char *table = ref->n_fields >= 2 ? string_field(ref->fields[ref->n_fields - 2]) : NULL;
	int found = -1;
	if (!column || (ref->n_fields >= 2 && !table))
		return -1;
	for (int i = 0; i < a->n_tables; i++) {
		const struct table_ref *t = &a->tables[i];
		if (!t->key || strcmp(t->key, column) != 0)
			continue;
		if (ref->n_fields == 2 && strcmp(t->name, table) != 0)
			continue;
		if (ref->n_fields == 3 && strcmp(t->rv->relname, table) != 0)
			continue;
		if (found >= 0)
			return -1;	/* ambiguous: PostgreSQL refuses it anyway */
		found = i;
	}
	return found;
}

static void add_value(struct analysis *a, int table, struct shard_value *v)
{
	struct shard_parse_result *out = a->out;
	if (out->n_values == a->values_cap) {
		a->values_cap = a->values_cap ? 2 * a->values_cap : 8;
		out->values = xrealloc(out->values, (size_t)a->values_cap * sizeof(*out->values));
		a->value_table = xrealloc(a->value_table, (size_t)a->values_cap * sizeof(int));
	}
	v->table = xstrdup(a->tables[table].rv->relname);
	v->column = xstrdup(a->tables[table].key);
	a->value_table[out->n_values] = table;
	out->values[out->n_values++] = *v;
}

static void free_value(struct shard_value *v)
{
	free(v->text);
	free(v->table);
	free(v->column);
}

static bool is_operator(const PgQuery__AExpr *e, const char *op)
{
	return e->n_name == 1 && string_field(e->name[0]) && strcmp(string_field(e->name[0]), op) == 0;
}

/* key = value (either side), key = key (joins two tables' keys), key IN (values). */
static void comparison(struct analysis *a, const PgQuery__AExpr *e, bool restricts)
{
	struct shard_value v;
	if (e->kind == PG_QUERY__A__EXPR__KIND__AEXPR_OP && is_operator(e, "=")) {
		int l = key_of_column(a, e->lexpr), r = key_of_column(a, e->rexpr);
		if (l >= 0 && r >= 0)
			a->tables[find_root(a, l)].parent = find_root(a, r);
		else if (l >= 0 && restricts && value_of(e->rexpr, &v))
			add_value(a, l, &v);
		else if (r >= 0 && restricts && value_of(e->lexpr, &v))
			add_value(a, r, &v);
		return;
	}
	if (e->kind != PG_QUERY__A__EXPR__KIND__AEXPR_IN || !is_operator(e, "=") || !restricts)
		return;
	int t = key_of_column(a, e->lexpr);
	if (t < 0 || !e->rexpr || e->rexpr->node_case != PG_QUERY__NODE__NODE_LIST)
		return;
	const PgQuery__List *list = e->rexpr->list;
	for (size_t i = 0; i < list->n_items; i++) {
		if (!value_of(list->items[i], &v))
			return;		/* not all values: no restriction from it */
		free_value(&v);
	}
	for (size_t i = 0; i < list->n_items; i++)
		if (value_of(list->items[i], &v))
			add_value(a, t, &v);
}

/* The top-level AND of a WHERE clause or a join's ON. */
static void conjunction(struct analysis *a, const PgQuery__Node *node, bool restricts, int depth)
{
	if (!node || depth > 100)
		return;
	if (node->node_case == PG_QUERY__NODE__NODE_BOOL_EXPR &&
	    node->bool_expr->boolop == PG_QUERY__BOOL_EXPR_TYPE__AND_EXPR) {
		for (size_t i = 0; i < node->bool_expr->n_args; i++)
			conjunction(a, node->bool_expr->args[i], restricts, depth + 1);
	} else if (node->node_case == PG_QUERY__NODE__NODE_A_EXPR) {
		comparison(a, node->a_expr, restricts);
	}
}

/* ------------------------------------------------------------------ FROM */

struct quals {
	const PgQuery__Node *node[MAX_TABLES];
	bool inner[MAX_TABLES];
	int n;
};

/* A FROM item's tables; its joins' ON clauses into q (read once every table is known). */
static void from_item(struct analysis *a, const PgQuery__Node *node, struct quals *q, int depth)
{
	if (!node || depth > MAX_TABLES)
		return;
	if (node->node_case == PG_QUERY__NODE__NODE_RANGE_VAR) {
		add_table(a, node->range_var);
	} else if (node->node_case == PG_QUERY__NODE__NODE_JOIN_EXPR) {
		const PgQuery__JoinExpr *j = node->join_expr;
		from_item(a, j->larg, q, depth + 1);
		from_item(a, j->rarg, q, depth + 1);
		if (j->quals && q->n < MAX_TABLES) {
			q->node[q->n] = j->quals;
			q->inner[q->n++] = j->jointype == PG_QUERY__JOIN_TYPE__JOIN_INNER;
		}
	}
	/* subqueries and functions in FROM: the generic walk looks inside */
}

static void from_list(struct analysis *a, PgQuery__Node *const *items, size_t n, struct quals *q)
{
	for (size_t i = 0; i < n; i++)
		from_item(a, items[i], q, 0);
}

static void with_clause(struct analysis *a, const PgQuery__WithClause *with)
{
	for (size_t i = 0; with && i < with->n_ctes; i++) {
		const PgQuery__Node *n = with->ctes[i];
		if (n->node_case == PG_QUERY__NODE__NODE_COMMON_TABLE_EXPR && a->n_ctes < MAX_CTES)
			a->ctes[a->n_ctes++] = n->common_table_expr->ctename;
	}
}

/* ------------------------------------------------------------------ the generic walk */

static bool own_table(const struct analysis *a, const ProtobufCMessage *m)
{
	if (m == (const ProtobufCMessage *)a->into)
		return true;
	for (int i = 0; i < a->n_tables; i++)
		if ((const ProtobufCMessage *)a->tables[i].rv == m)
			return true;
	return false;
}

/* What any message says wherever it is: a write, a sharded table out of the statement's own FROM, window functions, DISTINCT aggregates. */
static void look_at(struct analysis *a, const ProtobufCMessage *m)
{
	if (m->descriptor == &pg_query__insert_stmt__descriptor || m->descriptor == &pg_query__update_stmt__descriptor ||
	    m->descriptor == &pg_query__delete_stmt__descriptor) {
		a->out->writes = true;
	} else if (m->descriptor == &pg_query__select_stmt__descriptor) {
		const PgQuery__SelectStmt *s = (const PgQuery__SelectStmt *)m;
		a->out->writes |= s->into_clause != NULL || s->n_locking_clause > 0;
	} else if (m->descriptor == &pg_query__range_var__descriptor) {
		const PgQuery__RangeVar *rv = (const PgQuery__RangeVar *)m;
		if (!own_table(a, m) && !is_cte(a, rv) && key_column(a, rv))
			refuse(a, "%s on sharded table \"%.63s\" is not supported", a->nested_what, rv->relname);
	} else if (m->descriptor == &pg_query__func_call__descriptor) {
		const PgQuery__FuncCall *f = (const PgQuery__FuncCall *)m;
		const char *name = f->n_funcname ? string_field(f->funcname[f->n_funcname - 1]) : NULL;
		char what[120];
		if (f->over)
			cross_shard(a, "a window function");
		if (f->agg_distinct) {
			snprintf(what, sizeof(what), "%.63s(DISTINCT ...)", name ? name : "an aggregate");
			cross_shard(a, what);
		}
	}
}

static void walk(struct analysis *a, const ProtobufCMessage *m, int depth)
{
	if (!m || refused(a))
		return;
	if (depth > WALK_MAX_DEPTH) {
		refuse(a, "the statement is nested too deeply for a sharded database");
		return;
	}
	look_at(a, m);
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m;
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			ProtobufCMessage *const *items = *(ProtobufCMessage *const *const *)(base + f->offset);
			for (size_t k = 0; k < n; k++)
				walk(a, items[k], depth + 1);
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue;
		walk(a, *(ProtobufCMessage *const *)(base + f->offset), depth + 1);
	}
}

/* ------------------------------------------------------------------ statements */

/* The verdict once the statement's own tables, joins and values are known. */
static void finish(struct analysis *a)
{
	struct shard_parse_result *out = a->out;
	int groups = 0, unrestricted = 0, first = -1, second = -1;
	if (refused(a))
		return;
	for (int i = 0; i < a->n_tables; i++) {
		if (!a->tables[i].key || find_root(a, i) != i)
			continue;
		bool restricted = false;
		for (int v = 0; v < out->n_values; v++)
			restricted |= find_root(a, a->value_table[v]) == i;
		groups++;
		unrestricted += !restricted;
		if (first < 0)
			first = i;
		else if (second < 0)
			second = i;
	}
	if (groups == 0) {
		out->verdict = SHARD_PARSE_ALL;
		out->reference_only = true;
		out->cross_shard[0] = '\0';	/* one shard answers a read of reference tables */
		return;
	}
	if (groups > 1) {
		char what[160];
		snprintf(what, sizeof(what), "a join of sharded tables \"%.40s\" and \"%.40s\" not on their sharding keys",
			 a->tables[first].rv->relname, a->tables[second].rv->relname);
		if (unrestricted) {
			refuse(a, "%s is not supported", what);
			return;
		}
		cross_shard(a, what);
	}
	if (unrestricted) {
		out->verdict = SHARD_PARSE_ALL;
		if (out->cross_shard[0])
			refuse(a, "%s across shards is not supported", out->cross_shard);
		return;
	}
	out->verdict = SHARD_PARSE_KEYED;
}

/* The FROM items besides the statement's own table, the WHERE clause, the joins' ON; then the whole tree and the verdict. */
static void from_where(struct analysis *a, PgQuery__Node *const *from, size_t n_from, const PgQuery__Node *where,
		       const ProtobufCMessage *whole)
{
	struct quals q = { .n = 0 };
	from_list(a, from, n_from, &q);
	conjunction(a, where, true, 0);
	for (int i = 0; i < q.n; i++)
		conjunction(a, q.node[i], q.inner[i], 0);
	walk(a, whole, 0);
	finish(a);
}

/* The place of the target (SET, column list) named name, or -1. */
static int target_named(PgQuery__Node *const *targets, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (targets[i]->node_case == PG_QUERY__NODE__NODE_RES_TARGET && targets[i]->res_target->name &&
		    strcmp(targets[i]->res_target->name, name) == 0)
			return (int)i;
	return -1;
}

static void select_stmt(struct analysis *a, const PgQuery__SelectStmt *s)
{
	a->out->statement = SHARD_STMT_SELECT;
	with_clause(a, s->with_clause);
	if (s->op != PG_QUERY__SET_OPERATION__SETOP_NONE)
		a->nested_what = "UNION, INTERSECT or EXCEPT";
	a->into = s->into_clause ? s->into_clause->rel : NULL;
	from_where(a, s->from_clause, s->n_from_clause, s->where_clause, &s->base);
}

/* UPDATE t SET ... [FROM ...] WHERE ...: never a change of a sharded row's key. */
static void update_stmt(struct analysis *a, const PgQuery__UpdateStmt *u)
{
	a->out->statement = SHARD_STMT_UPDATE;
	with_clause(a, u->with_clause);
	add_table(a, u->relation);
	const char *key = a->n_tables ? a->tables[0].key : NULL;
	if (key && target_named(u->target_list, u->n_target_list, key) >= 0)
		refuse(a, "an UPDATE of the sharding key \"%.63s\" of table \"%.63s\" is not supported "
		       "(it would move the row to another shard)", key, u->relation->relname);
	from_where(a, u->from_clause, u->n_from_clause, u->where_clause, &u->base);
}

static void delete_stmt(struct analysis *a, const PgQuery__DeleteStmt *d)
{
	a->out->statement = SHARD_STMT_DELETE;
	with_clause(a, d->with_clause);
	add_table(a, d->relation);
	from_where(a, d->using_clause, d->n_using_clause, d->where_clause, &d->base);
}

/* Where the key is in each VALUES row: its column list's place, or the catalog's; -1 (refused) if unknown. */
static int insert_key_position(struct analysis *a, const PgQuery__InsertStmt *ins, const char *key)
{
	const PgQuery__RangeVar *rv = ins->relation;
	if (ins->n_cols > 0) {
		int at = target_named(ins->cols, ins->n_cols, key);
		if (at >= 0)
			return at;
		refuse(a, "an INSERT into sharded table \"%.63s\" must give its sharding key \"%.63s\"", rv->relname, key);
		return -1;
	}
	int pos = a->column_position ?
		  a->column_position(a->arg, rv->schemaname && rv->schemaname[0] ? rv->schemaname : NULL, rv->relname,
				     key) : -2;
	if (pos < 0)
		refuse(a, "the place of sharding key \"%.63s\" in table \"%.63s\" is not known: name the INSERT's columns",
		       key, rv->relname);
	return pos;
}

/* One VALUES row's key into the values, per row; false (refused) if it is not a constant, parameter or NULL. */
static bool insert_row(struct analysis *a, const PgQuery__Node *row, int pos, size_t number)
{
	struct shard_value v;
	const PgQuery__List *items = row->node_case == PG_QUERY__NODE__NODE_LIST ? row->list : NULL;
	const PgQuery__Node *item = items && (size_t)pos < items->n_items ? items->items[pos] : NULL;
	if (item && value_of(item, &v)) {
		add_value(a, 0, &v);
		return true;
	}
	const char *key = a->tables[0].key, *table = a->tables[0].rv->relname;
	if (item && item->node_case == PG_QUERY__NODE__NODE_SET_TO_DEFAULT)
		refuse(a, "row %zu of an INSERT into sharded table \"%.63s\" takes its sharding key \"%.63s\" from a "
		       "default: give it", number, table, key);
	else if (!item)
		refuse(a, "row %zu of an INSERT into sharded table \"%.63s\" has no sharding key \"%.63s\"", number, table,
		       key);
	else
		refuse(a, "row %zu of an INSERT into sharded table \"%.63s\" has a sharding key \"%.63s\" that is not a "
		       "constant or a parameter", number, table, key);
	return false;
}

static void insert_stmt(struct analysis *a, const PgQuery__InsertStmt *ins)
{
	a->out->statement = SHARD_STMT_INSERT;
	with_clause(a, ins->with_clause);
	add_table(a, ins->relation);
	const char *key = a->n_tables ? a->tables[0].key : NULL;
	const char *table = ins->relation->relname;
	const PgQuery__SelectStmt *sel = ins->select_stmt && ins->select_stmt->node_case == PG_QUERY__NODE__NODE_SELECT_STMT ?
					 ins->select_stmt->select_stmt : NULL;
	if (!key || refused(a)) {
		walk(a, &ins->base, 0);
		finish(a);
		return;
	}
	if (!sel || sel->n_values_lists == 0) {
		refuse(a, "%s into sharded table \"%.63s\" is not supported", sel ? "INSERT ... SELECT" :
		       "INSERT ... DEFAULT VALUES", table);
		return;
	}
	const PgQuery__OnConflictClause *oc = ins->on_conflict_clause;
	if (oc && target_named(oc->target_list, oc->n_target_list, key) >= 0)
		refuse(a, "ON CONFLICT DO UPDATE of the sharding key \"%.63s\" of table \"%.63s\" is not supported", key,
		       table);
	int pos = insert_key_position(a, ins, key);
	for (size_t i = 0; pos >= 0 && !refused(a) && i < sel->n_values_lists; i++)
		insert_row(a, sel->values_lists[i], pos, i + 1);
	a->nested_what = "a subquery";
	walk(a, &ins->base, 0);
	if (refused(a))
		return;
	a->out->per_row = true;
	a->out->verdict = SHARD_PARSE_KEYED;
}

static void statement(struct analysis *a, const PgQuery__Node *stmt)
{
	switch (stmt ? stmt->node_case : PG_QUERY__NODE__NODE__NOT_SET) {
	case PG_QUERY__NODE__NODE_SELECT_STMT:
		select_stmt(a, stmt->select_stmt);
		break;
	case PG_QUERY__NODE__NODE_INSERT_STMT:
		insert_stmt(a, stmt->insert_stmt);
		break;
	case PG_QUERY__NODE__NODE_UPDATE_STMT:
		update_stmt(a, stmt->update_stmt);
		break;
	case PG_QUERY__NODE__NODE_DELETE_STMT:
		delete_stmt(a, stmt->delete_stmt);
		break;
	default:
		a->out->statement = SHARD_STMT_OTHER;
		a->out->verdict = SHARD_PARSE_ALL;
		break;
	}
}

/* libpg_query's tree of sql, or NULL with out's verdict set (a parse error, a refusal). */
static PgQuery__ParseResult *parse_tree(const char *sql, struct shard_parse_result *out)
{
	size_t len = strlen(sql);
	if (len > SHARD_PARSE_MAX_LEN || shard_parse_too_deep(sql, len)) {
		out->verdict = SHARD_PARSE_REFUSED;
		snprintf(out->reason, sizeof(out->reason), len > SHARD_PARSE_MAX_LEN ?
			 "a statement over %d MB is not supported on a sharded database" :
			 "the statement is nested too deeply for a sharded database", SHARD_PARSE_MAX_LEN >> 20);
		return NULL;
	}
	PgQueryProtobufParseResult parsed = pg_query_parse_protobuf(sql);
	PgQuery__ParseResult *tree = NULL;
	if (parsed.error) {
		out->verdict = SHARD_PARSE_ERROR;
		snprintf(out->reason, sizeof(out->reason), "%s", parsed.error->message ? parsed.error->message :
			 "syntax error");
	} else {
		tree = pg_query__parse_result__unpack(NULL, parsed.parse_tree.len, (const uint8_t *)parsed.parse_tree.data);
		if (!tree) {
			out->verdict = SHARD_PARSE_ERROR;
			snprintf(out->reason, sizeof(out->reason), "the parse tree could not be read");
		}
	}
	pg_query_free_protobuf_parse_result(parsed);
	return tree;
}

void shard_parse(const char *sql, const struct shard_config *keys, shard_column_position_fn column_position,
		 void *arg, struct shard_parse_result *out)
{
	memset(out, 0, sizeof(*out));
	out->statement = SHARD_STMT_OTHER;
	PgQuery__ParseResult *tree = parse_tree(sql, out);
	if (!tree)
		return;
	struct analysis a = {
		.keys = keys, .column_position = column_position, .arg = arg, .out = out, .nested_what = "a subquery",
	};
	if (tree->n_stmts > 1) {
		refuse(&a, "several statements in one query are not supported on a sharded database: send them one at a time");
	} else if (tree->n_stmts == 0) {
		out->verdict = SHARD_PARSE_ALL;
	} else {
		statement(&a, tree->stmts[0]->stmt);
	}
	free(a.value_table);
	pg_query__parse_result__free_unpacked(tree, NULL);
	if (out->verdict != SHARD_PARSE_KEYED) {
		for (int i = 0; i < out->n_values; i++)
			free_value(&out->values[i]);
		free(out->values);
		out->values = NULL;
		out->n_values = 0;
		out->per_row = false;
	}
}

void shard_parse_result_free(struct shard_parse_result *r)
{
	for (int i = 0; i < r->n_values; i++)
		free_value(&r->values[i]);
	free(r->values);
	r->values = NULL;
	r->n_values = 0;
}
