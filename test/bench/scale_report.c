/*
 * scale_report.c - the failure-cause tables of the scale load generator's
 * reports (scale_gen.h): counted by name in a child, merged by name in
 * the parent, printed. Pure.
 */
#include "scale_gen.h"

void scale_causes_add(struct scale_causes *c, const char *name, uint64_t n)
{
	for (int i = 0; i < SCALE_CAUSES; i++) {
		if (c->e[i].name[0] == 0) {
			snprintf(c->e[i].name, sizeof(c->e[i].name), "%s", name);
			c->e[i].n = n;
			return;
		}
		if (strncmp(c->e[i].name, name, sizeof(c->e[i].name) - 1) == 0) {
			c->e[i].n += n;
			return;
		}
	}
	c->other += n;
}

void scale_causes_merge(struct scale_causes *into, const struct scale_causes *from)
{
	for (int i = 0; i < SCALE_CAUSES && from->e[i].name[0]; i++)
		scale_causes_add(into, from->e[i].name, from->e[i].n);
	into->other += from->other;
}

uint64_t scale_causes_total(const struct scale_causes *c)
{
	uint64_t t = c->other;
	for (int i = 0; i < SCALE_CAUSES && c->e[i].name[0]; i++)
		t += c->e[i].n;
	return t;
}

void scale_causes_format(const struct scale_causes *c, char *buf, size_t size)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; i < SCALE_CAUSES && c->e[i].name[0] && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s=%llu", n ? " " : "", c->e[i].name,
				      (unsigned long long)c->e[i].n);
	if (c->other && n < size)
		n += (size_t)snprintf(buf + n, size - n, "%sother=%llu", n ? " " : "", (unsigned long long)c->other);
	if (n == 0)
		snprintf(buf, size, "none");
}
