"""Airflow hooks: Airflow connections -> endpoint descriptors. Only this package and ``operators`` import Airflow."""
