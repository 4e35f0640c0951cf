"""zoo's command lines, one small file per command (parse, call one library function, print), all behind one
error boundary (boundary.py) and sharing the schema's flags (flags.py):

    python train.py                  train.py            python -m zoo.sweep           sweep.py
    python -m zoo.transfer           transfer.py         python -m zoo.sample          sample.py
    python -m zoo.export             export.py           python -m zoo.coord_check     coord_check.py
    python -m zoo.criticality        criticality.py      python -m zoo.data.prepare    prepare.py
    python -m zoo.audit              audit.py            python -m zoo.papers          papers.py
"""
