"""One-off measurements, each run as `python -m lab.experiments.<name>`. Each answered
one question; the top of its docstring says which, and the docs/ section that holds the
answer. Kept so that an answer can be re-measured when the code it measured changes."""
