"""Database restarts under load: private PostgreSQL and MariaDB servers, started by the test,
restarted (fast and immediate) while real workers and sync callers use them."""
