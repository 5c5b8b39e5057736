/* orders: a toy order desk. Most requests price a line from a small
 * catalog, quote its monthly installments and file it on the invoice (the
 * same arithmetic every time);
 * one in eight updates the account of a customer in a large table: a few
 * hundred regular customers stay in the cache, everybody else misses it.
 *
 *   orders [REQUESTS] [CUSTOMERS]
 *
 * CUSTOMERS (default 2,000,000 records of 64 bytes: 128 MB) sets the
 * table; a table that fits the cache (for example 2048) is the same
 * program with the cause of the misses removed. Prints a checksum and the
 * time the request loop took. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct item {
	uint32_t price_cents;
	uint16_t bulk_quantity; /* from this many units on, 10% off */
	uint8_t tax_class;
	uint8_t in_stock;
	uint16_t apr_basis_points; /* financing offered on it, per year */
	uint32_t sold;
	uint16_t reserved[25];
};

struct customer {
	uint64_t id;
	int64_t balance_cents;
	uint32_t orders;
	uint32_t last_day;
	uint32_t loyalty_points;
	uint32_t flags;
	uint64_t history[4];
};

enum { CATALOG = 256, REGULARS = 512 };

static const uint32_t tax_basis_points[4] = {0, 700, 1900, 2500};

enum { TERMS = 4, INVOICE_LINES = 64 };
static const int financing_months[TERMS] = {6, 12, 24, 36};

struct invoice_line {
	uint32_t item;
	uint32_t quantity;
	uint64_t total_cents;
	uint64_t installment_cents[TERMS];
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static inline uint64_t next_random(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long requests = argc > 1 ? atol(argv[1]) : 20000000;
	long customers = argc > 2 ? atol(argv[2]) : 2000000;
	if (requests <= 0 || customers < REGULARS) {
		fprintf(stderr, "usage: orders [REQUESTS>0] [CUSTOMERS>=%d]\n", REGULARS);
		return 2;
	}
	static struct item catalog[CATALOG];
	for (int i = 0; i < CATALOG; i++) {
		catalog[i].price_cents = 199 + (uint32_t)(next_random() % 20000);
		catalog[i].bulk_quantity = (uint16_t)(5 + next_random() % 20);
		catalog[i].tax_class = (uint8_t)(next_random() % 4);
		catalog[i].in_stock = 1;
		catalog[i].apr_basis_points = (uint16_t)(199 + next_random() % 2800);
	}
	struct customer *table = calloc((size_t)customers, sizeof *table);
	if (!table) {
		fprintf(stderr, "orders: cannot allocate %ld customers\n", customers);
		return 1;
	}
	for (long i = 0; i < customers; i++)
		table[i].id = (uint64_t)i;

	uint64_t revenue = 0, checksum = 0;
	static struct invoice_line invoice[INVOICE_LINES];
	double started = seconds_now();
	for (long r = 0; r < requests; r++) {
		uint64_t draw = next_random();
		if ((draw & 7) != 0) {
			/* Price one order line. */
			unsigned index = (unsigned)((draw >> 8) % CATALOG);
			const struct item *it = &catalog[index];
			uint32_t quantity = 1 + (uint32_t)((draw >> 16) % 30);
			uint64_t unit = it->price_cents;
			if (quantity >= it->bulk_quantity)
				unit = unit * 9 / 10;
			uint64_t subtotal = unit * quantity;
			uint64_t tax = subtotal * tax_basis_points[it->tax_class] / 10000;
			revenue += subtotal + tax;
			/* Quote the monthly installment for each financing term the
			 * desk offers (an annuity: P r / (1 - (1 + r)^-n)), and file the
			 * line on the invoice. */
			struct invoice_line *line = &invoice[r % INVOICE_LINES];
			double principal = (double)(subtotal + tax) / 100, monthly_rate = it->apr_basis_points / 120000.0;
			for (int k = 0; k < TERMS; k++)
				line->installment_cents[k] = (uint64_t)(100 * principal * monthly_rate /
				                                        (1 - pow(1 + monthly_rate, -financing_months[k])) + 0.5);
			line->item = index;
			line->quantity = quantity;
			line->total_cents = subtotal + tax;
			checksum = checksum * 31 + subtotal + line->installment_cents[TERMS - 1];
		} else {
			/* Update a customer's account: half the updates come from the
			 * regulars, half from anybody. */
			uint64_t who = (draw >> 8) & 1 ? (draw >> 16) % REGULARS : (draw >> 16) % (uint64_t)customers;
			struct customer *c = &table[who];
			c->orders++;
			c->balance_cents -= (int64_t)((draw >> 40) % 5000);
			c->loyalty_points += 1 + c->orders / 10;
			c->history[c->orders & 3] = (uint64_t)r;
			checksum ^= c->id + c->loyalty_points;
		}
	}
	double elapsed = seconds_now() - started;
	printf("orders: %ld requests, %ld customers, revenue %llu, checksum %016llx, loop %.3f s\n", requests, customers,
	       (unsigned long long)revenue, (unsigned long long)checksum, elapsed);
	free(table);
	return 0;
}
