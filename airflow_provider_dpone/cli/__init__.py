"""The ``dpone`` command line. Never imports Airflow; heavy modules are imported inside commands."""
