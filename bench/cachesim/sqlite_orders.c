// An order book kept in SQLite (the amalgamation bench/cachesim.sh fetches
// from npm's better-sqlite3): customers and their orders are inserted in
// one transaction with prepared statements, then the application asks what
// such an application asks: one customer's orders through an index, revenue
// per city (a join with grouping), and every order sorted by item and date.
//
// Usage: sqlite_orders [CUSTOMERS=20000] [ORDERS_PER_CUSTOMER=8] [LOOKUPS=50000]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

static const char *const kCities[] = {"Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Quebec", "Tartu", "Perth",
                                      "Accra", "Tbilisi", "Hanoi", "Cusco", "Bergen", "Dakar", "Split", "Malmo"};
static const char *const kItems[] = {"anchor", "bolt", "cable", "drill", "epoxy", "flange", "gasket", "hinge",
                                     "insulator", "joist", "knob", "lever", "manifold", "nozzle", "o-ring", "pulley",
                                     "rivet", "sprocket", "thermostat", "valve", "washer", "yoke", "zip tie"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng_state = 0x853c49e6748fea9bULL;
static uint64_t next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void die(sqlite3 *db, const char *what)
{
	fprintf(stderr, "sqlite_orders: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
	exit(1);
}

static void exec(sqlite3 *db, const char *sql)
{
	char *err = 0;
	if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
		fprintf(stderr, "sqlite_orders: %s: %s\n", sql, err ? err : "?");
		sqlite3_free(err);
		exit(1);
	}
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = 0;
	if (sqlite3_prepare_v2(db, sql, -1, &st, 0) != SQLITE_OK)
		die(db, sql);
	return st;
}

static void step_done(sqlite3 *db, sqlite3_stmt *st, const char *what)
{
	if (sqlite3_step(st) != SQLITE_DONE)
		die(db, what);
	sqlite3_reset(st);
}

static void create_schema(sqlite3 *db)
{
	exec(db, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, since INTEGER)");
	exec(db, "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), "
	         "item TEXT NOT NULL, quantity INTEGER NOT NULL, price REAL NOT NULL, placed INTEGER NOT NULL)");
}

static void insert_customers(sqlite3 *db, int customers)
{
	sqlite3_stmt *st = prepare(db, "INSERT INTO customers (id, name, city, since) VALUES (?, ?, ?, ?)");
	char name[32];
	for (int id = 1; id <= customers; id++) {
		snprintf(name, sizeof name, "customer-%06d", id);
		sqlite3_bind_int(st, 1, id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, kCities[next_random() % COUNT(kCities)], -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, 1600000000 + (int64_t)(next_random() % 100000000));
		step_done(db, st, "inserting a customer");
	}
	sqlite3_finalize(st);
}

static void insert_orders(sqlite3 *db, int customers, int per_customer)
{
	sqlite3_stmt *st = prepare(db, "INSERT INTO orders (customer_id, item, quantity, price, placed) VALUES (?, ?, ?, ?, ?)");
	int64_t orders = (int64_t)customers * per_customer;
	for (int64_t i = 0; i < orders; i++) {
		sqlite3_bind_int(st, 1, 1 + (int)(next_random() % (uint64_t)customers));
		sqlite3_bind_text(st, 2, kItems[next_random() % COUNT(kItems)], -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 3, 1 + (int)(next_random() % 20));
		sqlite3_bind_double(st, 4, (double)(next_random() % 100000) / 100.0);
		sqlite3_bind_int64(st, 5, 1650000000 + (int64_t)(next_random() % 50000000));
		step_done(db, st, "inserting an order");
	}
	sqlite3_finalize(st);
}

// One customer's order count and spending, through the index on customer_id.
static double lookup_customers(sqlite3 *db, int customers, int lookups)
{
	sqlite3_stmt *st = prepare(db, "SELECT count(*), total(quantity * price) FROM orders WHERE customer_id = ?");
	double spent = 0;
	for (int i = 0; i < lookups; i++) {
		sqlite3_bind_int(st, 1, 1 + (int)(next_random() % (uint64_t)customers));
		if (sqlite3_step(st) != SQLITE_ROW)
			die(db, "looking up a customer");
		spent += sqlite3_column_double(st, 1);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return spent;
}

// Revenue per city: every order joined to its customer, grouped.
static int revenue_by_city(sqlite3 *db, char *top_city, size_t top_size)
{
	sqlite3_stmt *st = prepare(db, "SELECT c.city, count(*), total(o.quantity * o.price) AS revenue "
	                               "FROM orders o JOIN customers c ON c.id = o.customer_id "
	                               "GROUP BY c.city ORDER BY revenue DESC");
	int cities = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (cities++ == 0)
			snprintf(top_city, top_size, "%s", (const char *)sqlite3_column_text(st, 0));
	}
	if (rc != SQLITE_DONE)
		die(db, "revenue by city");
	sqlite3_finalize(st);
	return cities;
}

// Every order by item and date (a sort SQLite cannot take from an index).
static uint64_t orders_by_item(sqlite3 *db)
{
	sqlite3_stmt *st = prepare(db, "SELECT item, placed, id FROM orders ORDER BY item, placed");
	uint64_t digest = 1469598103934665603ULL;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		digest = (digest ^ (uint64_t)sqlite3_column_int64(st, 2)) * 1099511628211ULL;
	if (rc != SQLITE_DONE)
		die(db, "orders by item");
	sqlite3_finalize(st);
	return digest;
}

int main(int argc, char **argv)
{
	int customers = argc > 1 ? atoi(argv[1]) : 20000;
	int per_customer = argc > 2 ? atoi(argv[2]) : 8;
	int lookups = argc > 3 ? atoi(argv[3]) : 50000;
	if (customers < 1 || per_customer < 1 || lookups < 0) {
		fprintf(stderr, "usage: sqlite_orders [CUSTOMERS>0] [ORDERS_PER_CUSTOMER>0] [LOOKUPS>=0]\n");
		return 2;
	}
	sqlite3 *db = 0;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		die(db, "opening an in-memory database");
	create_schema(db);
	exec(db, "BEGIN");
	insert_customers(db, customers);
	insert_orders(db, customers, per_customer);
	exec(db, "COMMIT");
	exec(db, "CREATE INDEX orders_by_customer ON orders(customer_id)");
	double spent = lookup_customers(db, customers, lookups);
	char top_city[64] = "";
	int cities = revenue_by_city(db, top_city, sizeof top_city);
	uint64_t digest = orders_by_item(db);
	printf("sqlite_orders: %d customers, %d orders, looked-up spending %.2f, %d cities (top %s), sort digest %016llx\n",
	       customers, customers * per_customer, spent, cities, top_city, (unsigned long long)digest);
	sqlite3_close(db);
	return 0;
}
