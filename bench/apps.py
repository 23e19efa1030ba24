from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "bench"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        from bench.statements import install_from_environment

        install_from_environment()
