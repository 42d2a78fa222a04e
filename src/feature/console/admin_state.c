/*
 * admin_state.c - the instance's console changes kept for a restarted
 * worker (see admin_state.h for what and why).
 *
 * Owns: the record's mapping. Knows nothing of databases or settings
 * beyond their names: admin_control.c decides what to record and applies
 * it again.
 */
#include "common.h"
#include "admin_state.h"
#include "log.h"

#include <pthread.h>
#include <sys/mman.h>

/* PgBouncer's MAX_DBNAME; a console command's key and value (admin.h). */
#define NAME_MAX_LEN 64
#define KEY_MAX_LEN 64
#define VALUE_MAX_LEN 256

struct db_entry {
	char name[NAME_MAX_LEN];	/* "" = free */
	uint32_t flags;			/* enum admin_db_flag */
};

struct param_entry {
	char key[KEY_MAX_LEN];		/* "" = free */
	char value[VALUE_MAX_LEN];
};

struct record {
	pthread_mutex_t lock;
	uint32_t full_logged;
	struct db_entry dbs[ADMIN_STATE_DBS];
	struct param_entry params[ADMIN_STATE_PARAMS];
};

static struct record *rec;	/* NULL: one process, nothing kept */

void admin_state_create(void)
{
	void *mem = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("could not map the console's record: %s", strerror(errno));
	rec = mem;
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	if (pthread_mutex_init(&rec->lock, &attr) != 0)
		die("could not make the console record's lock");
	pthread_mutexattr_destroy(&attr);
}

void admin_state_destroy(void)
{
	if (rec)
		munmap(rec, sizeof(*rec));
	rec = NULL;
}

static void record_lock(void)
{
	int rc = pthread_mutex_lock(&rec->lock);
	/* Its holder died: each write under the lock leaves an entry whole (a name is set last). */
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&rec->lock);
	else if (rc != 0)
		die("console record lock: %s", strerror(rc));
}

static void record_unlock(void)
{
	pthread_mutex_unlock(&rec->lock);
}

/* Logged once per instance: the record is full, this change is not kept for a restart. */
static void log_full(const char *what, const char *name)
{
	if (rec->full_logged)
		return;
	rec->full_logged = 1;
	log_warning("the console's record is full: %s %s will not be applied again by a restarted worker", what, name);
}

/* The entry of db, a free one if not there (and create), NULL if none. Under the lock. */
static struct db_entry *db_entry(const char *db, bool create)
{
	struct db_entry *free_entry = NULL;
	for (int i = 0; i < ADMIN_STATE_DBS; i++) {
		struct db_entry *e = &rec->dbs[i];
		if (e->name[0] && strcmp(e->name, db) == 0)
			return e;
		if (!free_entry && !e->name[0])
			free_entry = e;
	}
	if (!create || !free_entry)
		return NULL;
	free_entry->flags = 0;
	snprintf(free_entry->name, sizeof(free_entry->name), "%s", db);
	return free_entry;
}

void admin_state_db_flag(const char *db, enum admin_db_flag flag, bool on)
{
	if (!rec || (db && strlen(db) >= NAME_MAX_LEN))
		return;
	record_lock();
	if (!db) {
		for (int i = 0; i < ADMIN_STATE_DBS; i++)
			rec->dbs[i].flags &= ~(uint32_t)flag;
	} else {
		struct db_entry *e = db_entry(db, on);
		if (e && on)
			e->flags |= flag;
		else if (e)
			e->flags &= ~(uint32_t)flag;
		else if (on)
			log_full("database", db);
	}
	for (int i = 0; i < ADMIN_STATE_DBS; i++)	/* no flag left: free for another */
		if (!rec->dbs[i].flags)
			rec->dbs[i].name[0] = '\0';
	record_unlock();
}

void admin_state_param(const char *key, const char *value)
{
	if (!rec || strlen(key) >= KEY_MAX_LEN || strlen(value) >= VALUE_MAX_LEN)
		return;
	record_lock();
	struct param_entry *slot = NULL, *free_entry = NULL;
	for (int i = 0; i < ADMIN_STATE_PARAMS && !slot; i++) {
		struct param_entry *e = &rec->params[i];
		if (strcmp(e->key, key) == 0)
			slot = e;
		else if (!free_entry && !e->key[0])
			free_entry = e;
	}
	if (!slot)
		slot = free_entry;
	if (slot) {
		snprintf(slot->value, sizeof(slot->value), "%s", value);
		snprintf(slot->key, sizeof(slot->key), "%s", key);
	} else {
		log_full("SET", key);
	}
	record_unlock();
}

void admin_state_forget_params(void)
{
	if (!rec)
		return;
	record_lock();
	for (int i = 0; i < ADMIN_STATE_PARAMS; i++)
		rec->params[i].key[0] = '\0';
	record_unlock();
}

/* Entries are copied out under the lock, and fn runs without it: it may take its time. */
void admin_state_each_db(void (*fn)(const char *db, unsigned flags, void *arg), void *arg)
{
	for (int i = 0; rec && i < ADMIN_STATE_DBS; i++) {
		record_lock();
		struct db_entry e = rec->dbs[i];
		record_unlock();
		if (e.name[0] && e.flags)
			fn(e.name, e.flags, arg);
	}
}

void admin_state_each_param(void (*fn)(const char *key, const char *value, void *arg), void *arg)
{
	for (int i = 0; rec && i < ADMIN_STATE_PARAMS; i++) {
		record_lock();
		struct param_entry e = rec->params[i];
		record_unlock();
		if (e.key[0])
			fn(e.key, e.value, arg);
	}
}
