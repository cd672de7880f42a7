// hotspots_cxx.cpp - a C++ program for sonde run's sampler: its functions have mangled names
// (a namespace, a class, a template), which the reports must show demangled.
#include <cstdlib>

namespace dec {
volatile double g_sink;

template <typename T> struct Model {
    __attribute__((noinline)) void matmul(long n)
    {
        T x = 0;
        for (long i = 0; i < n; i++)
            x += static_cast<T>(i) * static_cast<T>(0.5);
        g_sink = x;
    }
};
} // namespace dec

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? std::atol(argv[1]) : 20;
    dec::Model<double> m;
    for (long r = 0; r < rounds; r++)
        m.matmul(10000000);
    return 0;
}
