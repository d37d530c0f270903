"""`obs-iac lint`: rule files and the plan, checked before anything runs.

One module per area; each rule is a LintRule plugin registered under
``obs_iac.lint_rules`` with a stable ``area/name`` code and a docs page
``docs/lint/<area>/<name>.md``. The PromQL engine (engine.py) builds one corpus of rule
groups, a metric catalogue and one label-flow analysis per expression; its checks live
in ``checks/``.
"""
