"""A Django app of the tests: a model the tasks write, and tasks on ``pgque.django.app``."""
