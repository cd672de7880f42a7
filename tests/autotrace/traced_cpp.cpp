// traced_cpp.cpp - C++ for the autotrace test: a namespace, a class, a template, an exception
// caught two frames up (the instrumented exits run during unwinding).
#include <stdexcept>

namespace ns {
struct Widget {
    int run(int n);
};

template <class T> T twice(T v)
{
    return v + v;
}

static int thrower(int n)
{
    if (n > 2)
        throw std::runtime_error("deep");
    return n;
}

int Widget::run(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += twice<int>(i);
    try {
        s += thrower(n);
    } catch (const std::exception &) {
        s -= 1;
    }
    return s;
}
} // namespace ns

extern "C" int cpp_entry(int n)
{
    ns::Widget w;
    return w.run(n) + static_cast<int>(ns::twice<double>(1.5));
}
