"""What an operation is: its descriptor and the engine protocol its bind is written against,
the registry of every operation, the algorithms built from primitives, and nccl-tests'
conventions for a point's figures. The driver reads it to plan (names, sizes, `why_not`); the
rank binds its operations to an engine. Importing it loads no torch: the binds that need torch
import it where they run."""
