"""How fast each CEL library for Python compiles and evaluates DRA device selectors, and
which of the selectors Kubernetes documents each one accepts (docs/devices.md, "Why
cel-expr-python").

Run it with the interpreter of a virtualenv holding the candidates (each is optional;
an absent one is skipped):

    python -m venv /tmp/cel && /tmp/cel/bin/pip install cel-expr-python==0.1.3 \
        common-expression-language==0.10.0 cel-python==0.5.0
    /tmp/cel/bin/python lab/experiments/cel_candidates.py

Each candidate gets what it needs to read a quantity (a `quantity()` function and a
`compareTo` member), so the only differences left are the libraries' own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DEVICE = {
    "driver": "gpu.example.com",
    "attributes": {"gpu.example.com": {"model": "a100", "cores": 8, "numa": 1}},
    "capacity": {"gpu.example.com": {"memory": {"q": "40Gi"}}},
    "allowMultipleAllocations": False,
}
# The shapes the DRA documentation shows: a driver check, an attribute, a capacity
# compared as a quantity, an optional attribute (`.?`) and `cel.bind`.
EXAMPLES = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "a100"',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0',
    'device.attributes["gpu.example.com"].?family.orValue("") == ""',
    'cel.bind(g, device.attributes["gpu.example.com"], g.cores >= 4 && g.numa == 1)',
]
ROUNDS = 2000


def _cmp(a: Any, b: Any) -> int:
    return 0


def _quantity(s: Any) -> Any:
    return {"q": s}


def cel_expr_python() -> tuple[Callable[[str], Any], Callable[[Any], Any]]:
    from cel_expr_python import cel  # type: ignore[import-not-found]
    from cel_expr_python.ext import ext_bindings, ext_optional  # type: ignore[import-not-found]

    env = cel.NewEnv(
        variables={"device": cel.Type.DYN},
        extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional()],
        functions=[
            cel.FunctionDecl("quantity", [cel.Overload(
                "quantity_string", return_type=cel.Type.MAP, parameters=[cel.Type.STRING],
                impl=_quantity)]),
            cel.FunctionDecl("compareTo", [cel.Overload(
                "quantity_compareTo", return_type=cel.Type.INT,
                parameters=[cel.Type.MAP, cel.Type.MAP], is_member=True, impl=_cmp)]),
        ],
    )
    return env.compile, lambda p: p.eval(data={"device": DEVICE}).value()


def common_expression_language() -> tuple[Callable[[str], Any], Callable[[Any], Any]]:
    import cel  # type: ignore[import-not-found]

    ctx = cel.Context(variables={"device": DEVICE},
                      functions={"quantity": _quantity, "compareTo": _cmp})
    return cel.compile, lambda p: p.execute(ctx)


def cel_python() -> tuple[Callable[[str], Any], Callable[[Any], Any]]:
    import celpy  # type: ignore[import-not-found]

    env = celpy.Environment()
    act = {"device": celpy.json_to_cel(DEVICE)}
    fns = {"quantity": lambda s: celpy.json_to_cel({"q": str(s)}),
           "compareTo": lambda a, b: celpy.celtypes.IntType(0)}
    return (lambda e: env.program(env.compile(e), functions=fns)), lambda p: p.evaluate(act)


def main() -> None:
    for name, make in (("cel-expr-python", cel_expr_python),
                       ("common-expression-language", common_expression_language),
                       ("cel-python", cel_python)):
        try:
            compile_, run = make()
        except ImportError:
            print(f"{name}: not installed")
            continue
        print(name)
        for expr in EXAMPLES:
            try:
                t0 = time.perf_counter()
                for _ in range(ROUNDS // 10):
                    prog = compile_(expr)
                t1 = time.perf_counter()
                result = run(prog)
                for _ in range(ROUNDS):
                    run(prog)
                t2 = time.perf_counter()
            except Exception as e:  # a library's refusal is the finding here
                print(f"  {expr[:60]:60}  refused: {str(e).splitlines()[0][:60]}")
                continue
            print(f"  {expr[:60]:60}  compile {(t1 - t0) / (ROUNDS // 10) * 1e6:7.1f} µs"
                  f"  eval {(t2 - t1) / ROUNDS * 1e6:6.1f} µs  -> {result}")


if __name__ == "__main__":
    main()
