"""What an operation is: its descriptor, the registry of every operation, and the algorithms
built from primitives. The driver reads it to plan (names, sizes, `why_not`); the rank binds
its operations to an engine. Importing it loads no torch."""
