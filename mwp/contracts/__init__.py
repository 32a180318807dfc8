"""What workflows, activities and clients agree on: workflow IDs and types, task queues, Update,
Query and Signal names, and their typed inputs and results. Deterministic and free of I/O, so
workflow code imports it inside the sandbox."""
