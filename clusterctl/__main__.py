from clusterctl.cli.app import run_program

run_program()
