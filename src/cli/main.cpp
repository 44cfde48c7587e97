#include <cstdio>
int main() { std::puts("kipp"); return 0; }
