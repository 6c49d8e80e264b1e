"""The plan guard: tools or agents a plan names that do not exist, with suggestions, and
the bounded retry that drives a model back to a valid plan."""
