"""The core's model: plain data (`types`), quantities and resources, the predicates on
them (`constraints`, `fit`), the conversion of API objects into that data (`convert`,
`convert_groups`), the gang sources, the settings, and the vocabulary the core speaks
(reasons, actions, results).

It is the bottom layer: nothing here imports anything of the core above it (the cache,
the planner, the queue, the ledger, preemption, the verbs, the manager), which
tests/repo/test_layering.py checks. Everything here is a value or a pure function of values,
so the lifecycle modules above and the adapters share one meaning of each word."""
