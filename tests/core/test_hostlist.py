from clusterctl.hostlist import compress


def test_ranges_are_compressed_with_zero_padding() -> None:
    assert compress(["gpu01", "gpu02", "gpu03", "gpu07"]) == "gpu[01-03,07]"


def test_names_without_numbers_and_different_prefixes_stay_apart() -> None:
    assert compress(["login", "gpu-a1", "gpu-a2", "gpu-b1"]) == "login,gpu-a[1-2],gpu-b1"


def test_single_host() -> None:
    assert compress(["node9"]) == "node9"
