# Filled in by the trainer gates work.
