"""Pass tracing, backend registry, debug-handle provenance and int8-I/O passes."""
