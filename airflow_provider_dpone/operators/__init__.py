"""Airflow operators of the dpone provider (the transfer itself is composed in ``compose``)."""
