"""`zoo.fit`: laws fitted from sweeps (issue 42). Each size's best LR (and weight decay) from a parabola through the
grid minimum, a power law across the sizes that vary, bootstrap intervals over seeds and grid points, a held-out size
predicted; the law file is what the `fitted` scaling policy (zoo.policy.fitted) reads.

    read.py     sweep dirs as grids per size (one model and recipe; a policy's units)
    optimum.py  one size's optimum and its interval
    law.py      the power law across sizes and its interval
    result.py   the fit put together, refusals and the held-out check
    lawfile.py  law.json
    report.py   table, plot, JSON
"""
