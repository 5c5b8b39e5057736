/* A JSON order log and queries over it, the kind of code profile-guided
 * optimization is for: a tokenizer whose few hot cases (strings, integers,
 * punctuation) share a switch with rare ones (escapes, \u sequences,
 * exponents, literals), helpers called from several places of which one is
 * hot (the string scanner, key interning, member lookup), a recursive
 * descent parser building a tree in an arena, and cold error paths.
 * The program writes a log of orders as JSON (deterministic, no files),
 * parses it ROUNDS times and answers the same queries each time.
 * Usage: jsonq [ROUNDS] [ORDERS]   prints the queries' answers and a checksum;
 *        jsonq --print [ORDERS]     prints the log itself (tests check the answers
 *                                   against another JSON parser's). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void *xmalloc(size_t size)
{
	void *p = malloc(size);
	if (!p) {
		fprintf(stderr, "jsonq: out of memory (%zu bytes)\n", size);
		exit(1);
	}
	return p;
}

/* ---- a growable text buffer (the writer's output) ---- */

struct text {
	char *data;
	size_t length, capacity;
};

static void text_reserve(struct text *t, size_t more)
{
	if (t->length + more <= t->capacity)
		return;
	size_t capacity = t->capacity ? t->capacity : 4096;
	while (capacity < t->length + more)
		capacity *= 2;
	char *data = realloc(t->data, capacity);
	if (!data) {
		fprintf(stderr, "jsonq: out of memory (text of %zu bytes)\n", capacity);
		exit(1);
	}
	t->data = data;
	t->capacity = capacity;
}

static void text_put(struct text *t, const char *s)
{
	size_t n = strlen(s);
	text_reserve(t, n);
	memcpy(t->data + t->length, s, n);
	t->length += n;
}

static void text_printf(struct text *t, const char *format, ...)
{
	char line[256];
	va_list args;
	va_start(args, format);
	vsnprintf(line, sizeof line, format, args);
	va_end(args);
	text_put(t, line);
}

/* ---- the order log ---- */

static const char *const kTiers[] = {"bronze", "silver", "gold", "platinum"};
static const char *const kStatus[] = {"shipped", "shipped", "shipped", "pending", "cancelled", "returned"};
static const char *const kTags[] = {"gift", "express", "fragile", "bulk", "repeat", "promo"};
static const char *const kNotes[] = {
	"leave at the door",
	"call before delivery",
	"ring twice\\tthen wait",
	"caf\\u00e9 entrance, \\\"blue\\\" gate",
	"deliver after 6pm",
};

static void write_item(struct text *t, uint64_t r)
{
	int cents = (int)(r % 10000);
	text_printf(t, "{\"sku\":\"SKU-%05u\",\"qty\":%u,\"price\":%d.%02d", (unsigned)(r >> 20) % 50000,
		    1 + (unsigned)(r >> 40) % 5, cents / 100, cents % 100);
	if ((r >> 8) % 16 == 0)
		text_printf(t, ",\"weight\":%.3e", (double)((r >> 12) % 9000) / 7.0);
	text_put(t, "}");
}

static void write_order(struct text *t, unsigned id)
{
	uint64_t r = next_random();
	unsigned customer = (unsigned)(r % 997) * (unsigned)((r >> 16) % 997) / 997;
	text_printf(t, "{\"id\":%u,\"customer\":{\"id\":%u,\"name\":\"Customer %u\",\"tier\":\"%s\"},", id, customer,
		    customer, kTiers[customer % 4]);
	text_printf(t, "\"status\":\"%s\",\"items\":[", kStatus[(r >> 32) % 6]);
	unsigned items = 1 + (unsigned)(r >> 36) % 6;
	for (unsigned i = 0; i < items; i++) {
		if (i)
			text_put(t, ",");
		write_item(t, next_random());
	}
	text_put(t, "],\"tags\":[");
	unsigned tags = (unsigned)(r >> 44) % 3;
	for (unsigned i = 0; i < tags; i++)
		text_printf(t, "%s\"%s\"", i ? "," : "", kTags[(r >> (48 + 3 * i)) % 6]);
	text_printf(t, "],\"paid\":%s", (r >> 60) % 4 ? "true" : "false");
	if ((r >> 56) % 8 == 0)
		text_printf(t, ",\"note\":\"%s\"", kNotes[(r >> 52) % 5]);
	if ((r >> 50) % 4 == 0)
		text_put(t, ",\"coupon\":null");
	text_put(t, "}");
}

static struct text write_log(unsigned orders)
{
	struct text t = {0};
	text_put(&t, "{\"version\":2,\"orders\":[\n");
	for (unsigned id = 0; id < orders; id++) {
		write_order(&t, 100000 + id);
		text_put(&t, id + 1 < orders ? ",\n" : "\n");
	}
	text_put(&t, "]}\n");
	text_reserve(&t, 1);
	t.data[t.length] = '\0';
	return t;
}

/* ---- the tree: values in an arena, keys interned ---- */

enum kind { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT };

struct value;
struct member {
	int key; /* an interned key */
	struct value *value;
};

struct value {
	enum kind kind;
	uint32_t count; /* an array's items, an object's members, a string's bytes */
	union {
		double number;
		const char *string;
		struct value **items;
		struct member *members;
	};
};

struct arena {
	char **blocks; /* blocks of kBlock bytes (or one larger object), reused after a reset */
	size_t *sizes;
	size_t count, current, used;
};

enum { kBlock = 1 << 20 };

static void arena_next_block(struct arena *a, size_t size)
{
	while (a->count && a->current + 1 < a->count) {
		a->current++;
		a->used = 0;
		if (a->sizes[a->current] >= size)
			return;
	}
	a->blocks = realloc(a->blocks, (a->count + 1) * sizeof *a->blocks);
	a->sizes = realloc(a->sizes, (a->count + 1) * sizeof *a->sizes);
	if (!a->blocks || !a->sizes) {
		fprintf(stderr, "jsonq: out of memory (arena)\n");
		exit(1);
	}
	a->sizes[a->count] = size > kBlock ? size : kBlock;
	a->blocks[a->count] = xmalloc(a->sizes[a->count]);
	a->current = a->count++;
	a->used = 0;
}

static void *arena_alloc(struct arena *a, size_t size)
{
	size = (size + 7) & ~(size_t)7;
	if (!a->count || a->used + size > a->sizes[a->current])
		arena_next_block(a, size);
	void *p = a->blocks[a->current] + a->used;
	a->used += size;
	return p;
}

/* Everything allocated is gone; the blocks stay for the next document. */
static void arena_reset(struct arena *a)
{
	a->current = 0;
	a->used = 0;
}

static void arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->count; i++)
		free(a->blocks[i]);
	free(a->blocks);
	free(a->sizes);
	memset(a, 0, sizeof *a);
}

struct keys {
	struct {
		uint64_t hash;
		const char *name;
		uint32_t length;
		int id;
	} *slots;
	size_t size, used;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static void keys_grow(struct keys *k)
{
	struct keys bigger = {calloc(k->size ? k->size * 2 : 64, sizeof *k->slots), k->size ? k->size * 2 : 64, 0};
	if (!bigger.slots) {
		fprintf(stderr, "jsonq: out of memory (keys)\n");
		exit(1);
	}
	for (size_t i = 0; i < k->size; i++) {
		if (!k->slots[i].name)
			continue;
		size_t j = k->slots[i].hash & (bigger.size - 1);
		while (bigger.slots[j].name)
			j = (j + 1) & (bigger.size - 1);
		bigger.slots[j] = k->slots[i];
		bigger.used++;
	}
	free(k->slots);
	*k = bigger;
}

/* The key's id, the same for every spelling of it (names are copied: the
 * text they came from may go). */
static int intern(struct keys *k, const char *name, size_t length)
{
	if (2 * (k->used + 1) > k->size)
		keys_grow(k);
	uint64_t hash = hash_bytes(name, length);
	size_t j = hash & (k->size - 1);
	while (k->slots[j].name) {
		if (k->slots[j].hash == hash && k->slots[j].length == length &&
		    memcmp(k->slots[j].name, name, length) == 0)
			return k->slots[j].id;
		j = (j + 1) & (k->size - 1);
	}
	char *copy = xmalloc(length + 1);
	memcpy(copy, name, length);
	copy[length] = '\0';
	k->slots[j].hash = hash;
	k->slots[j].name = copy;
	k->slots[j].length = (uint32_t)length;
	k->slots[j].id = (int)k->used++;
	return k->slots[j].id;
}

/* ---- the tokenizer ---- */

enum token { T_END, T_LBRACE, T_RBRACE, T_LBRACKET, T_RBRACKET, T_COLON, T_COMMA, T_STRING, T_NUMBER,
	     T_TRUE, T_FALSE, T_NULL, T_ERROR };

struct parser {
	const char *p, *end;
	enum token token;
	const char *string; /* T_STRING: its bytes (unescaped), in the arena or the text */
	uint32_t length;
	double number; /* T_NUMBER */
	struct arena *arena;
	struct keys *keys;
	char error[128];
	int depth;
};

static void fail(struct parser *ps, const char *format, ...)
{
	if (ps->error[0])
		return;
	va_list args;
	va_start(args, format);
	vsnprintf(ps->error, sizeof ps->error, format, args);
	va_end(args);
	ps->token = T_ERROR;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A string with escapes: unescaped into the arena (UTF-8 for \u). */
static enum token lex_escaped_string(struct parser *ps, const char *start)
{
	char *out = arena_alloc(ps->arena, (size_t)(ps->end - start));
	size_t n = 0;
	const char *p = start;
	while (p < ps->end && *p != '"') {
		if (*p != '\\') {
			out[n++] = *p++;
			continue;
		}
		if (++p >= ps->end)
			break;
		char c = *p++;
		switch (c) {
		case '"': case '\\': case '/': out[n++] = c; break;
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			int code = 0;
			for (int i = 0; i < 4; i++) {
				int d = p < ps->end ? hex_digit(*p++) : -1;
				if (d < 0) {
					fail(ps, "bad \\u escape at byte %td", p - start);
					return T_ERROR;
				}
				code = code * 16 + d;
			}
			if (code < 0x80) {
				out[n++] = (char)code;
			} else if (code < 0x800) {
				out[n++] = (char)(0xc0 | code >> 6);
				out[n++] = (char)(0x80 | (code & 0x3f));
			} else {
				out[n++] = (char)(0xe0 | code >> 12);
				out[n++] = (char)(0x80 | ((code >> 6) & 0x3f));
				out[n++] = (char)(0x80 | (code & 0x3f));
			}
			break;
		}
		default:
			fail(ps, "bad escape \\%c", c);
			return T_ERROR;
		}
	}
	if (p >= ps->end) {
		fail(ps, "unterminated string");
		return T_ERROR;
	}
	ps->p = p + 1;
	ps->string = out;
	ps->length = (uint32_t)n;
	return T_STRING;
}

/* A string token: most have no escapes and are used where they lie. */
static enum token lex_string(struct parser *ps)
{
	const char *start = ps->p;
	const char *p = start;
	while (p < ps->end && *p != '"' && *p != '\\') {
		if ((unsigned char)*p < 0x20) {
			fail(ps, "control character in a string");
			return T_ERROR;
		}
		p++;
	}
	if (p < ps->end && *p == '"') {
		ps->string = start;
		ps->length = (uint32_t)(p - start);
		ps->p = p + 1;
		return T_STRING;
	}
	return lex_escaped_string(ps, start);
}

static const double kPowers[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
				 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number with an exponent, or too many digits for the fast path. */
static enum token lex_number_slow(struct parser *ps, const char *start)
{
	char buffer[64];
	const char *p = start;
	while (p < ps->end && (strchr("+-.eE", *p) || (*p >= '0' && *p <= '9')))
		p++;
	if (p - start >= (long)sizeof buffer) {
		fail(ps, "number too long");
		return T_ERROR;
	}
	memcpy(buffer, start, (size_t)(p - start));
	buffer[p - start] = '\0';
	char *endp;
	ps->number = strtod(buffer, &endp);
	if (*endp) {
		fail(ps, "bad number %s", buffer);
		return T_ERROR;
	}
	ps->p = p;
	return T_NUMBER;
}

static enum token lex_number(struct parser *ps)
{
	const char *start = ps->p, *p = start;
	int negative = *p == '-';
	p += negative;
	uint64_t mantissa = 0;
	int digits = 0, decimals = 0;
	while (p < ps->end && *p >= '0' && *p <= '9') {
		mantissa = mantissa * 10 + (uint64_t)(*p++ - '0');
		digits++;
	}
	if (p < ps->end && *p == '.') {
		p++;
		while (p < ps->end && *p >= '0' && *p <= '9') {
			mantissa = mantissa * 10 + (uint64_t)(*p++ - '0');
			decimals++;
		}
	}
	if (digits == 0 || digits + decimals > 18 || (p < ps->end && (*p == 'e' || *p == 'E')))
		return lex_number_slow(ps, start);
	double value = (double)mantissa / kPowers[decimals];
	ps->number = negative ? -value : value;
	ps->p = p;
	return T_NUMBER;
}

static enum token lex_word(struct parser *ps, const char *word, enum token token)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
		fail(ps, "unexpected '%.8s'", ps->p);
		return T_ERROR;
	}
	ps->p += n;
	return token;
}

static enum token next_token(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r'))
		ps->p++;
	if (ps->p >= ps->end)
		return ps->token = T_END;
	char c = *ps->p;
	switch (c) {
	case '{': ps->p++; return ps->token = T_LBRACE;
	case '}': ps->p++; return ps->token = T_RBRACE;
	case '[': ps->p++; return ps->token = T_LBRACKET;
	case ']': ps->p++; return ps->token = T_RBRACKET;
	case ':': ps->p++; return ps->token = T_COLON;
	case ',': ps->p++; return ps->token = T_COMMA;
	case '"': ps->p++; return ps->token = lex_string(ps);
	case 't': return ps->token = lex_word(ps, "true", T_TRUE);
	case 'f': return ps->token = lex_word(ps, "false", T_FALSE);
	case 'n': return ps->token = lex_word(ps, "null", T_NULL);
	case '-': case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		return ps->token = lex_number(ps);
	default:
		fail(ps, "unexpected character '%c'", c);
		return T_ERROR;
	}
}

/* ---- the parser ---- */

static struct value *parse_value(struct parser *ps);

static struct value *new_value(struct parser *ps, enum kind kind)
{
	struct value *v = arena_alloc(ps->arena, sizeof *v);
	v->kind = kind;
	v->count = 0;
	return v;
}

/* Items and members are gathered on the stack (most containers are small)
 * and copied into the arena when the container closes. */
enum { kSmall = 16 };

static struct value *parse_array(struct parser *ps)
{
	struct value *small[kSmall], **items = small;
	size_t n = 0, capacity = kSmall;
	struct value *array = new_value(ps, J_ARRAY);
	if (next_token(ps) != T_RBRACKET) {
		for (;;) {
			struct value *item = parse_value(ps);
			if (!item)
				goto out;
			if (n == capacity) {
				struct value **bigger = xmalloc(2 * capacity * sizeof *bigger);
				memcpy(bigger, items, n * sizeof *items);
				if (items != small)
					free(items);
				items = bigger;
				capacity *= 2;
			}
			items[n++] = item;
			if (next_token(ps) == T_RBRACKET)
				break;
			if (ps->token != T_COMMA) {
				fail(ps, "expected ',' or ']' in an array");
				goto out;
			}
			next_token(ps);
		}
	}
	array->count = (uint32_t)n;
	array->items = arena_alloc(ps->arena, n * sizeof *items);
	memcpy(array->items, items, n * sizeof *items);
out:
	if (items != small)
		free(items);
	return ps->error[0] ? NULL : array;
}

static struct value *parse_object(struct parser *ps)
{
	struct member small[kSmall], *members = small;
	size_t n = 0, capacity = kSmall;
	struct value *object = new_value(ps, J_OBJECT);
	if (next_token(ps) != T_RBRACE) {
		for (;;) {
			if (ps->token != T_STRING) {
				fail(ps, "expected a key in an object");
				goto out;
			}
			int key = intern(ps->keys, ps->string, ps->length);
			if (next_token(ps) != T_COLON) {
				fail(ps, "expected ':' after a key");
				goto out;
			}
			next_token(ps);
			struct value *value = parse_value(ps);
			if (!value)
				goto out;
			if (n == capacity) {
				struct member *bigger = xmalloc(2 * capacity * sizeof *bigger);
				memcpy(bigger, members, n * sizeof *members);
				if (members != small)
					free(members);
				members = bigger;
				capacity *= 2;
			}
			members[n].key = key;
			members[n++].value = value;
			if (next_token(ps) == T_RBRACE)
				break;
			if (ps->token != T_COMMA) {
				fail(ps, "expected ',' or '}' in an object");
				goto out;
			}
			next_token(ps);
		}
	}
	object->count = (uint32_t)n;
	object->members = arena_alloc(ps->arena, n * sizeof *members);
	memcpy(object->members, members, n * sizeof *members);
out:
	if (members != small)
		free(members);
	return ps->error[0] ? NULL : object;
}

/* The value that starts at the current token. */
static struct value *parse_value(struct parser *ps)
{
	struct value *v;
	if (++ps->depth > 64) {
		fail(ps, "nested too deeply");
		return NULL;
	}
	switch (ps->token) {
	case T_LBRACE: v = parse_object(ps); break;
	case T_LBRACKET: v = parse_array(ps); break;
	case T_STRING:
		v = new_value(ps, J_STRING);
		v->string = ps->string;
		v->count = ps->length;
		break;
	case T_NUMBER:
		v = new_value(ps, J_NUMBER);
		v->number = ps->number;
		break;
	case T_TRUE: v = new_value(ps, J_TRUE); break;
	case T_FALSE: v = new_value(ps, J_FALSE); break;
	case T_NULL: v = new_value(ps, J_NULL); break;
	default:
		fail(ps, "expected a value");
		v = NULL;
	}
	ps->depth--;
	return v;
}

static struct value *parse(const char *text, size_t length, struct arena *arena, struct keys *keys)
{
	struct parser ps = {.p = text, .end = text + length, .arena = arena, .keys = keys};
	next_token(&ps);
	struct value *root = parse_value(&ps);
	if (root && next_token(&ps) != T_END)
		fail(&ps, "text after the document");
	if (ps.error[0]) {
		fprintf(stderr, "jsonq: parse error at byte %td: %s\n", ps.p - text, ps.error);
		exit(1);
	}
	return root;
}

/* ---- queries ---- */

static const struct value *member(const struct value *object, int key)
{
	if (!object || object->kind != J_OBJECT)
		return NULL;
	for (uint32_t i = 0; i < object->count; i++)
		if (object->members[i].key == key)
			return object->members[i].value;
	return NULL;
}

static int string_is(const struct value *v, const char *s)
{
	return v && v->kind == J_STRING && v->count == strlen(s) && memcmp(v->string, s, v->count) == 0;
}

static double number_of(const struct value *v)
{
	return v && v->kind == J_NUMBER ? v->number : 0.0;
}

struct answers {
	unsigned orders, shipped, gifts, unpaid, noted, coupons;
	double revenue, best_total;
	unsigned best_customer;
	double tier_revenue[4];
	uint64_t checksum;
};

struct key_ids {
	int id, customer, tier, status, items, qty, price, weight, tags, paid, note, coupon, orders;
};

static double order_total(const struct value *order, const struct key_ids *k, uint64_t *checksum)
{
	const struct value *items = member(order, k->items);
	double total = 0;
	for (uint32_t i = 0; items && items->kind == J_ARRAY && i < items->count; i++) {
		const struct value *item = items->items[i];
		double line = number_of(member(item, k->qty)) * number_of(member(item, k->price));
		const struct value *weight = member(item, k->weight);
		if (weight)
			*checksum += (uint64_t)(number_of(weight) * 1000);
		total += line;
	}
	return total;
}

static int has_tag(const struct value *order, const struct key_ids *k, const char *tag)
{
	const struct value *tags = member(order, k->tags);
	for (uint32_t i = 0; tags && tags->kind == J_ARRAY && i < tags->count; i++)
		if (string_is(tags->items[i], tag))
			return 1;
	return 0;
}

static int tier_index(const struct value *tier)
{
	for (int t = 0; t < 4; t++)
		if (string_is(tier, kTiers[t]))
			return t;
	return -1;
}

static void answer(const struct value *root, struct keys *keys, double *per_customer, struct answers *a)
{
	struct key_ids k = {
		intern(keys, "id", 2),     intern(keys, "customer", 8), intern(keys, "tier", 4),
		intern(keys, "status", 6), intern(keys, "items", 5),    intern(keys, "qty", 3),
		intern(keys, "price", 5),  intern(keys, "weight", 6),   intern(keys, "tags", 4),
		intern(keys, "paid", 4),   intern(keys, "note", 4),     intern(keys, "coupon", 6),
		intern(keys, "orders", 6),
	};
	const struct value *orders = member(root, k.orders);
	for (uint32_t i = 0; orders && orders->kind == J_ARRAY && i < orders->count; i++) {
		const struct value *order = orders->items[i];
		const struct value *customer = member(order, k.customer);
		unsigned who = (unsigned)number_of(member(customer, k.id));
		double total = order_total(order, &k, &a->checksum);
		a->orders++;
		a->checksum = a->checksum * 31 + (uint64_t)number_of(member(order, k.id));
		if (!string_is(member(order, k.status), "shipped"))
			continue;
		a->shipped++;
		a->revenue += total;
		per_customer[who % 1000] += total;
		int tier = tier_index(member(customer, k.tier));
		if (tier >= 0)
			a->tier_revenue[tier] += total;
		a->gifts += has_tag(order, &k, "gift");
		const struct value *paid = member(order, k.paid);
		a->unpaid += paid && paid->kind == J_FALSE;
		const struct value *note = member(order, k.note);
		if (note && note->kind == J_STRING) {
			a->noted++;
			a->checksum += note->count; /* its bytes after unescaping */
		}
		a->coupons += member(order, k.coupon) != NULL;
	}
	for (unsigned c = 0; c < 1000; c++)
		if (per_customer[c] > a->best_total) {
			a->best_total = per_customer[c];
			a->best_customer = c;
		}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--print") == 0) {
		long orders = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
		if (orders < 1 || orders > 10000000) {
			fprintf(stderr, "usage: jsonq --print [ORDERS 1-10000000]\n");
			return 2;
		}
		struct text log = write_log((unsigned)orders);
		fwrite(log.data, 1, log.length, stdout);
		free(log.data);
		return 0;
	}
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	long orders = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
	if (rounds < 1 || orders < 1 || orders > 10000000) {
		fprintf(stderr, "usage: jsonq [ROUNDS >= 1] [ORDERS 1-10000000] | --print [ORDERS]\n");
		return 2;
	}
	struct text log = write_log((unsigned)orders);
	struct keys keys = {0};
	struct answers total = {0};
	struct arena arena = {0};
	for (long r = 0; r < rounds; r++) {
		double per_customer[1000] = {0};
		struct answers a = {0};
		const struct value *root = parse(log.data, log.length, &arena, &keys);
		answer(root, &keys, per_customer, &a);
		total = a;
		arena_reset(&arena);
	}
	arena_free(&arena);
	printf("%zu bytes, %u orders, %u shipped, revenue %.2f, %u gifts, %u unpaid, %u noted, %u coupons\n", log.length,
	       total.orders, total.shipped, total.revenue, total.gifts, total.unpaid, total.noted, total.coupons);
	printf("tiers %.2f %.2f %.2f %.2f; best customer %u (%.2f); %zu keys; checksum %llu\n", total.tier_revenue[0],
	       total.tier_revenue[1], total.tier_revenue[2], total.tier_revenue[3], total.best_customer,
	       total.best_total, keys.used, (unsigned long long)total.checksum);
	free(log.data);
	for (size_t i = 0; i < keys.size; i++)
		free((char *)keys.slots[i].name);
	free(keys.slots);
	return 0;
}
