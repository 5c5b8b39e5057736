#!/usr/bin/env python3
"""jsonq's answers against Python's JSON parser (test pgo.jsonq).

    jsonq_check.py JSONQ [ORDERS]

Runs `JSONQ --print ORDERS` for the log, answers the same queries over
Python's parse of it (the same double arithmetic in the same order, so the
printed figures must agree to the last digit), and compares them with what
`JSONQ 1 ORDERS` and `JSONQ 3 ORDERS` print (each round parses the log again
in a reused arena: the answers must not change from round to round). The
checksum includes each note's length after unescaping, so the escape path
(`\t`, `\"`, `\u00e9`) is checked too.
"""
import json
import subprocess
import sys

TIERS = ["bronze", "silver", "gold", "platinum"]
MASK = (1 << 64) - 1


def keys_of(value, found):
    """Every object key in value, recursively."""
    if isinstance(value, dict):
        for key, inner in value.items():
            found.add(key)
            keys_of(inner, found)
    elif isinstance(value, list):
        for inner in value:
            keys_of(inner, found)
    return found


def answers(log_bytes):
    """The two lines jsonq prints, computed from Python's parse of the log."""
    root = json.loads(log_bytes.decode("utf-8"))
    orders = shipped = gifts = unpaid = noted = coupons = 0
    revenue = 0.0
    tiers = [0.0] * 4
    per_customer = [0.0] * 1000
    checksum = 0
    for order in root["orders"]:
        total = 0.0
        for item in order["items"]:
            line = float(item["qty"]) * float(item["price"])
            if "weight" in item:
                checksum = (checksum + int(float(item["weight"]) * 1000)) & MASK
            total += line
        orders += 1
        checksum = (checksum * 31 + order["id"]) & MASK
        if order["status"] != "shipped":
            continue
        shipped += 1
        revenue += total
        per_customer[order["customer"]["id"] % 1000] += total
        tier = order["customer"]["tier"]
        if tier in TIERS:
            tiers[TIERS.index(tier)] += total
        gifts += "gift" in order.get("tags", [])
        unpaid += order.get("paid") is False
        if "note" in order:
            noted += 1
            checksum = (checksum + len(order["note"].encode("utf-8"))) & MASK
        coupons += "coupon" in order
    best, best_total = 0, 0.0
    for customer, spent in enumerate(per_customer):
        if spent > best_total:
            best, best_total = customer, spent
    keys = len(keys_of(root, set()))
    return (f"{len(log_bytes)} bytes, {orders} orders, {shipped} shipped, revenue {revenue:.2f}, {gifts} gifts, "
            f"{unpaid} unpaid, {noted} noted, {coupons} coupons\n"
            f"tiers {tiers[0]:.2f} {tiers[1]:.2f} {tiers[2]:.2f} {tiers[3]:.2f}; best customer {best} "
            f"({best_total:.2f}); {keys} keys; checksum {checksum}\n")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    jsonq = sys.argv[1]
    orders = sys.argv[2] if len(sys.argv) > 2 else "3000"
    log = subprocess.run([jsonq, "--print", orders], check=True, capture_output=True).stdout
    expected = answers(log)
    for rounds in ("1", "3"):
        got = subprocess.run([jsonq, rounds, orders], check=True, capture_output=True, text=True).stdout
        if got != expected:
            sys.exit(f"FAIL: jsonq {rounds} {orders} printed\n{got}but Python's parse of its log gives\n{expected}")
    for escaped in (b"\\u00e9", b'\\"blue\\"', b"\\t"):
        if escaped not in log:
            sys.exit(f"FAIL: the log of {orders} orders has no {escaped!r}: the test no longer checks escapes")
    print(f"ok: jsonq's answers for {orders} orders agree with Python's parse, for 1 and 3 rounds")


if __name__ == "__main__":
    main()
