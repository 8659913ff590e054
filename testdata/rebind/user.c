/* Imports dep_value from libdep through its PLT. */
int dep_value(int x);
int call_dep(int x) { return dep_value(x); }
