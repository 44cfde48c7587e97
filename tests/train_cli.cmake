# Filled in by the trainer CLI work.
