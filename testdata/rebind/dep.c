/* A dependency only libuser imports, so rebinding its symbol process-wide touches one slot. */
int dep_value(int x) { return x + 1; }
int fake_dep_value(int x) { return x * 1000; }
