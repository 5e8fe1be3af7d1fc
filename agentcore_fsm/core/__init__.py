"""The pure core: the data model, the declarations, the declared-machine engine, and the loop
and per-call machines with their inputs, effects and steps. No I/O, no clock; imports nothing
else of the package."""
