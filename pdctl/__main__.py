from pdctl.cli import app

app(prog_name="pdctl")
