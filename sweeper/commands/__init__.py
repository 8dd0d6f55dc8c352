"""The CLI's commands, a module per command: its options, examples, help and body
(`sweeper/cli.py` registers them). Where a command's work needs pandas, that work is a module
of its own beside it (`compare_runs`, `history_runs`, `export_textfiles`, `plan_estimate`,
`nightly_run`), loaded once the options are good, so `sweeper --help` and a refusal of bad
input stay fast; `options` declares the sweep's options once, `common` what commands share."""
