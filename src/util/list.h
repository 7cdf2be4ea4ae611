/*
 * Intrusive doubly-linked list, for least-recently-used orders.
 *
 * The router keeps its live trajectories and the model its prompt trees in recency order, to
 * evict the least recently used past a cap: both need O(1) "touch" (move to the front), O(1)
 * removal of any member and the oldest at the back, without allocating per member. So the
 * links live inside the member (a struct list_node field) and the list holds only its ends;
 * list_entry gets from a node back to its member (redis adlist.c, but intrusive as the Linux
 * list_head). Ends are NULL-terminated, not circular, so a zeroed list is empty and a zeroed
 * node is unlinked. A node is in at most one list at a time; the list does not own its members.
 * Not thread-safe; every operation O(1).
 */
#ifndef UTIL_LIST_H
#define UTIL_LIST_H

#include <stddef.h>

struct list_node {
    struct list_node *prev; /* toward the front (more recently used); NULL at the front */
    struct list_node *next; /* toward the back (less recently used); NULL at the back */
};

/* A zeroed struct is an empty list. */
struct list {
    struct list_node *front; /* most recently pushed or touched; NULL when empty */
    struct list_node *back;  /* least recently: the one to evict */
};

/* The struct of type `type` whose member `member` is the node ptr (not NULL). */
#define list_entry(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Inserts n, not in any list, at the front of l. */
static inline void list_push_front(struct list *l, struct list_node *n)
{
    n->prev = NULL;
    n->next = l->front;
    if (l->front)
        l->front->prev = n;
    l->front = n;
    if (!l->back)
        l->back = n;
}

/* Removes n, a member of l, from it; n's links are cleared. */
static inline void list_unlink(struct list *l, struct list_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->front = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->back = n->prev;
    n->prev = n->next = NULL;
}

/* Moves n, a member of l, to the front (marks it most recently used). */
static inline void list_move_front(struct list *l, struct list_node *n)
{
    list_unlink(l, n);
    list_push_front(l, n);
}

#endif
