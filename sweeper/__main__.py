from sweeper.cli import app

app(prog_name="sweeper")
