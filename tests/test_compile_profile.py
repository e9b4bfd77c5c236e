"""implementations.compile_profile's report: kernels ranked by their own compile seconds, and for one
compiled more than once, exactly the arguments whose types told its compilations apart."""

from numba import types

from implementations.compile_profile import Compilation, report


def test_the_report_ranks_kernels_and_names_the_arguments_that_differ():
    array, readonly = types.int32[::1], types.Array(types.int32, 1, "C", readonly=True)
    found = [
        Compilation("m.narrow", ("cands", "lo", "store"), (readonly, types.int64, types.boolean), 2.0),
        Compilation("m.narrow", ("cands", "lo", "store"), (array, types.int64, types.literal(True)), 3.0),
        Compilation("m.lookups", ("plan",), (types.int64,), 1.5),
    ]
    lines = report(7.0, found)
    assert lines[0] == "wall 7.0 s, 3 compilations, 6.5 s in all"
    assert lines[2].split() == ["5.0", "s", "2x", "m.narrow"] and lines[3].split() == ["1.5", "s", "1x", "m.lookups"]
    differ = lines[lines.index("kernels compiled more than once, and the arguments whose types differ:") + 1 :]
    assert differ[0].split() == ["5.0", "s", "m.narrow"]
    assert "lo=" not in differ[1] and "cands=readonly array(int32, 1d, C)" in differ[1] and "store=bool" in differ[1]
    assert "cands=array(int32, 1d, C)" in differ[2] and "store=Literal[bool](True)" in differ[2]
    assert len(differ) == 3  # lookups, compiled once, is not listed
