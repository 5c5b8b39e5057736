// A program with known symbols for the symbolizer tests
// (tests/unit/symbols/symbolizer_test.cpp): namespaced overloads, a member
// function, a static function, an extern "C" function, and calls through the
// PLT (puts, and putchar whose address is also taken, so it goes through
// .plt.got). Built -O1 -g; noinline/noipa keep every function out of line
// and unchanged in name.
#include <cstdio>

#if defined(__clang__)
#define ECPI_KEEP __attribute__((noinline, used))
#else
#define ECPI_KEEP __attribute__((noipa, used))
#endif

namespace ecpi_test {

ECPI_KEEP int compute(int x) {
    int sum = 0;
    for (int i = 0; i < x; ++i) sum += i * i;
    return sum;
}

ECPI_KEEP double compute(double x) {
    double sum = 0;
    for (int i = 0; i < 10; ++i) sum += x / (i + 1);
    return sum;
}

struct Widget {
    int spin(int n) const;
    int base = 3;
};

ECPI_KEEP int Widget::spin(int n) const {
    int acc = base;
    for (int i = 0; i < n; ++i) acc = acc * 31 + i;
    return acc;
}

}  // namespace ecpi_test

ECPI_KEEP static int local_helper(int x) { return x * 7 + 1; }

extern "C" ECPI_KEEP int plain_c_function(int x) { return local_helper(x) + 2; }

int (*volatile g_putchar)(int) = &putchar;

int main(int argc, char**) {
    puts("symtest");
    ecpi_test::Widget w;
    int r = ecpi_test::compute(argc) + w.spin(argc) + plain_c_function(argc);
    r += static_cast<int>(ecpi_test::compute(static_cast<double>(argc)));
    putchar('0' + (r & 7));
    g_putchar('\n');
    return 0;
}
