"""The report's sections, each built from the run's view (report/view.py: its rows, record
and a baseline's rows where given). A section appears when its data exists: a function
returns None otherwise. Pure, apart from building plotly figure objects.

Where a point was timed both ways (`--launch graph,eager`), the figures and tables show its
CUDA-graph time (`analysis.preferred`), and each says which launch mode it shows; the
eager times are in the launch cost section.
"""
