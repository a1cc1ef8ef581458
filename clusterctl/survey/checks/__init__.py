"""The survey's checks, one module per kind of fact.

- ``codes``: every finding code with what it means and the fix to try.
- ``host``: ``SurveyedHost`` (one host as the checks see it), majorities, peer groups.
- ``baseline``: ``FleetBaseline``, the fleet side of every comparison, built once per survey.
- ``reachability``, ``gpu``, ``nic``, ``stack``: the checks themselves.

``clusterctl.survey.findings`` runs them all.
"""
