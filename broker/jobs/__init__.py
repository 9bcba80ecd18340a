"""Async jobs: state in the database (store), ids on a queue (queue), run by `broker worker`."""
