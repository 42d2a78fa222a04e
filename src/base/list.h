/*
 * list.h - intrusive doubly-linked lists with a count.
 *
 * Every connection sits in exactly one list that matches its state, so a
 * pool's counters are the lengths of its lists and never drift.
 */
#ifndef PGVALVE_LIST_H
#define PGVALVE_LIST_H

#include "common.h"

struct list_node {
	struct list_node *prev;
	struct list_node *next;
};

struct list {
	struct list_node head;
	uint32_t count;
};

static inline void list_init(struct list *l)
{
	l->head.prev = l->head.next = &l->head;
	l->count = 0;
}

static inline void list_node_init(struct list_node *n)
{
	n->prev = n->next = NULL;
}

static inline bool list_node_linked(const struct list_node *n)
{
	return n->next != NULL;
}

static inline bool list_empty(const struct list *l)
{
	return l->count == 0;
}

static inline void list_append(struct list *l, struct list_node *n)
{
	n->prev = l->head.prev;
	n->next = &l->head;
	l->head.prev->next = n;
	l->head.prev = n;
	l->count++;
}

static inline void list_prepend(struct list *l, struct list_node *n)
{
	n->next = l->head.next;
	n->prev = &l->head;
	l->head.next->prev = n;
	l->head.next = n;
	l->count++;
}

static inline void list_remove(struct list *l, struct list_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
	l->count--;
}

static inline struct list_node *list_first(const struct list *l)
{
	return l->count ? l->head.next : NULL;
}

static inline struct list_node *list_last(const struct list *l)
{
	return l->count ? l->head.prev : NULL;
}

#define list_for_each(pos, l) \
	for (struct list_node *pos = (l)->head.next; pos != &(l)->head; pos = pos->next)

/* Safe against removing pos inside the loop. */
#define list_for_each_safe(pos, tmp, l) \
	for (struct list_node *pos = (l)->head.next, *tmp = pos->next; pos != &(l)->head; \
	     pos = tmp, tmp = pos->next)

#endif
