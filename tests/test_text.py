"""ddg.text: viterbi_decode / ViterbiDecoder against brute force over every path (with
Paddle 3.3.1's start/stop-tag convention, checked on its own outputs), and the text
datasets on small archives in the official formats."""
import itertools

import numpy as np
import pytest

import ddg
from ddg.text import ViterbiDecoder, viterbi_decode


def _brute(pot, tr, lens, bos):
    n = tr.shape[0]
    scores, paths = [], np.zeros((len(lens), int(max(lens))), dtype=np.int64)
    for b, L in enumerate(lens):
        best = None
        for path in itertools.product(range(n), repeat=int(L)):
            s = sum(pot[b, t, path[t]] for t in range(L)) + sum(tr[path[t - 1], path[t]] for t in range(1, L))
            if bos:
                s += tr[n - 1, path[0]] + tr[n - 2, path[-1]]
            if best is None or s > best[0] + 1e-12:
                best = (s, path)
        scores.append(best[0])
        paths[b, :L] = best[1]
    return np.array(scores), paths


@pytest.mark.parametrize("bos", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1, 2), (3, 4, 3), (4, 5, 4), (2, 3, 5)])
def test_viterbi_against_brute_force(shape, dtype, bos, rng):
    b, t, n = shape
    pot = rng.standard_normal(shape).astype(dtype)
    tr = rng.standard_normal((n, n)).astype(dtype)
    lens = rng.integers(1, t + 1, b)
    scores, paths = viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), ddg.to_tensor(lens), bos)
    want_s, want_p = _brute(pot.astype(np.float64), tr.astype(np.float64), lens, bos)
    assert scores.dtype == np.dtype(dtype) and paths.dtype == ddg.int64
    assert paths.shape == [b, int(lens.max())]
    np.testing.assert_allclose(scores.numpy(), want_s, rtol=1e-5 if dtype == "float32" else 1e-12)
    np.testing.assert_array_equal(paths.numpy(), want_p)
    s2, p2 = ViterbiDecoder(ddg.to_tensor(tr), include_bos_eos_tag=bos)(ddg.to_tensor(pot), ddg.to_tensor(lens))
    np.testing.assert_array_equal(p2.numpy(), paths.numpy())


def test_viterbi_paddle_values_and_errors():
    rng = np.random.default_rng(0)
    pot, tr = rng.standard_normal((3, 4, 4)), rng.standard_normal((4, 4))
    lens = ddg.to_tensor(np.array([4, 2, 1]))
    s, p = viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), lens)  # Paddle 3.3.1's outputs
    np.testing.assert_allclose(s.numpy(), [5.16423931, 4.90954733, 0.76990903], rtol=1e-8)
    assert p.numpy().tolist() == [[2, 0, 0, 1], [2, 1, 0, 0], [2, 0, 0, 0]]
    with pytest.raises(ValueError, match="transition_params must be"):
        viterbi_decode(ddg.to_tensor(pot), ddg.ones([3, 3], dtype="float64"), lens)
    with pytest.raises(TypeError, match="lengths has dtype"):
        viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), ddg.ones([3]))
    with pytest.raises(ValueError, match="lengths must be in"):
        viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), ddg.to_tensor(np.array([5, 1, 1])))


def _tar(path, members):
    import io
    import tarfile
    with tarfile.open(path, "w:gz") as tf:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return str(path)


def test_imdb_reads_the_archive_as_paddle(tmp_path):
    path = _tar(tmp_path / "aclImdb_v1.tar.gz", {
        "aclImdb/train/pos/0_9.txt": "Good movie, good PLOT!\n", "aclImdb/train/neg/0_1.txt": "bad movie.",
        "aclImdb/test/pos/0_8.txt": "good good", "aclImdb/test/neg/0_2.txt": "bad plot bad", "aclImdb/README": "x"})
    ds = ddg.text.datasets.Imdb(path, mode="train", cutoff=1)
    assert ds.word_idx == {"good": 0, "bad": 1, "movie": 2, "plot": 3, "<unk>": 4}
    assert len(ds) == 2
    words, label = ds[0]
    assert words.tolist() == [0, 2, 0, 3] and label.tolist() == [0] and words.dtype == np.int64
    assert ds[1][0].tolist() == [1, 2] and ds[1][1].tolist() == [1]
    test = ddg.text.Imdb(path, mode="test", cutoff=2)  # only good (4) and bad (3) are kept
    assert test[1][0].tolist() == [1, 2, 1]
    with pytest.raises(ValueError, match="mode must be one of"):
        ddg.text.datasets.Imdb(path, mode="valid")


def test_imikolov_ngram_and_seq(tmp_path):
    path = _tar(tmp_path / "simple-examples.tgz", {"./simple-examples/data/ptb.train.txt": " a b a \n",
                                                   "./simple-examples/data/ptb.valid.txt": " b c \n",
                                                   "./simple-examples/data/ptb.test.txt": " a d \n"})
    ng = ddg.text.datasets.Imikolov(path, data_type="NGRAM", window_size=2, min_word_freq=1)
    assert ng.word_idx == {"<e>": 0, "<s>": 1, "a": 2, "b": 3, "<unk>": 4}
    assert [tuple(int(v) for v in ng[i]) for i in range(len(ng))] == [(1, 2), (2, 3), (3, 2), (2, 0)]
    seq = ddg.text.datasets.Imikolov(path, data_type="SEQ", mode="test", min_word_freq=1)
    src, trg = seq[0]
    assert src.tolist() == [1, 2, 4] and trg.tolist() == [2, 4, 0]
    assert len(ddg.text.datasets.Imikolov(path, data_type="SEQ", window_size=2, mode="test", min_word_freq=1)) == 0
    with pytest.raises(ValueError, match="window_size"):
        ddg.text.datasets.Imikolov(path, data_type="NGRAM")
    bad = _tar(tmp_path / "other.tgz", {"x.txt": "a"})
    with pytest.raises(ValueError, match="no member './simple-examples/data/ptb.train.txt'"):
        ddg.text.datasets.Imikolov(bad, data_type="SEQ")


def test_uci_housing_normalisation_split_and_checksum(tmp_path, monkeypatch):
    rows = np.arange(10 * 14, dtype=np.float64).reshape(10, 14) ** 1.5 / 7
    path = tmp_path / "housing.data"
    np.savetxt(path, rows, fmt="%.6f")
    rows = np.loadtxt(path)
    want = rows.copy()
    want[:, :-1] = (rows[:, :-1] - rows[:, :-1].mean(0)) / (rows[:, :-1].max(0) - rows[:, :-1].min(0))
    train, test = (ddg.text.datasets.UCIHousing(str(path), mode=m) for m in ("train", "test"))
    assert len(train) == 8 and len(test) == 2
    x, y = test[1]
    assert x.dtype == np.float32 and x.shape == (13,) and y.shape == (1,)
    np.testing.assert_allclose(x, want[9, :-1], rtol=1e-6)
    np.testing.assert_allclose(y, want[9, -1:], rtol=1e-6)
    # the cache folder: a file with the wrong checksum is refused, naming the sum expected
    monkeypatch.setenv("DDG_DATA_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "uci_housing").mkdir(parents=True)
    (tmp_path / "cache" / "uci_housing" / "housing.data").write_text("1 2 3")
    with pytest.raises(ValueError, match="d4accdce7a25600298819f8e28e8d593"):
        ddg.text.datasets.UCIHousing(download=False)


def test_movielens_items_and_split(tmp_path):
    import zipfile
    path = tmp_path / "ml-1m.zip"
    ratings = [(1, 2, 5), (2, 1, 3), (1, 1, 1), (2, 2, 4), (1, 2, 2), (2, 1, 5)]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ml-1m/movies.dat", "1::Toy Story (1995)::Animation|Comedy\n2::Heat (1995)::Action|Crime\n")
        z.writestr("ml-1m/users.dat", "1::F::1::10::48067\n2::M::56::16::70072\n")
        z.writestr("ml-1m/ratings.dat", "".join(f"{u}::{m}::{r}::978300760\n" for u, m, r in ratings))
    train, test = (ddg.text.datasets.Movielens(str(path), mode=m, test_ratio=0.4, rand_seed=5)
                   for m in ("train", "test"))
    draws = np.random.RandomState(5).random_sample(len(ratings)) < 0.4  # Paddle's split rule
    assert len(test) == draws.sum() and len(train) == len(ratings) - draws.sum()
    assert train.categories_dict == {"Action": 0, "Animation": 1, "Comedy": 2, "Crime": 3}
    assert train.movie_title_dict == {"heat": 0, "story": 1, "toy": 2}
    u, m, r = [x for x, t in zip(ratings, draws) if not t][0]
    item = [v.tolist() for v in train[0]]
    movie = {1: ([1], [1, 2], [2, 1]), 2: ([2], [0, 3], [0])}[m]
    user = {1: [[1], [1], [0], [10]], 2: [[2], [0], [6], [16]]}[u]
    assert item == user + [movie[0], movie[1], movie[2], [r * 2 - 5.0]]


def test_wmt14_pairs_and_dicts(tmp_path):
    path = _tar(tmp_path / "wmt14.tgz", {
        "wmt14/src.dict": "<s>\n<e>\n<unk>\nthe\ncat\nsat\n", "wmt14/trg.dict": "<s>\n<e>\n<unk>\nle\nchat\n",
        "wmt14/train/train": "the cat\tle chat\nthe dog sat\tle chien\nbroken line\n",
        "wmt14/test/test": ("the " * 80) + "\tle\n"})
    ds = ddg.text.datasets.WMT14(path, mode="train", dict_size=5)  # 'sat' (line 6) is past dict_size
    assert len(ds) == 2
    assert [a.tolist() for a in ds[0]] == [[0, 3, 4, 1], [0, 3, 4], [3, 4, 1]]
    assert [a.tolist() for a in ds[1]] == [[0, 3, 2, 2, 1], [0, 3, 2], [3, 2, 1]]
    assert ds.get_dict(reverse=True)[1][4] == "chat"
    assert len(ddg.text.datasets.WMT14(path, mode="test", dict_size=5)) == 0  # over 80 ids: skipped
    with pytest.raises(ValueError, match="dict_size"):
        ddg.text.datasets.WMT14(path)


@pytest.mark.parametrize("lang", ["en", "de"])
def test_wmt16_dictionaries_from_each_language(lang, tmp_path):
    path = _tar(tmp_path / "wmt16.tar.gz", {
        "wmt16/train": "a dog runs\tein hund\na cat\teine katze\na dog\tein hund läuft\n",
        "wmt16/test": "a bird\tein vogel\n", "wmt16/val": "bad line\n"})
    ds = ddg.text.datasets.WMT16(path, mode="test", src_dict_size=5, trg_dict_size=5, lang=lang)
    en = {"<s>": 0, "<e>": 1, "<unk>": 2, "a": 3, "dog": 4}
    de = {"<s>": 0, "<e>": 1, "<unk>": 2, "ein": 3, "hund": 4}
    assert ds.get_dict("en") == en and ds.get_dict("de") == de
    src, trg, nxt = (a.tolist() for a in ds[0])
    # "a bird" / "ein vogel": the first word of each side is known, the second is not
    assert (src, trg, nxt) == ([0, 3, 2, 1], [0, 3, 2], [3, 2, 1])
    assert ds.get_dict("de", reverse=True)[4] == "hund"
    assert len(ddg.text.datasets.WMT16(path, mode="val", src_dict_size=5, trg_dict_size=5)) == 0
    with pytest.raises(ValueError, match="lang must be"):
        ddg.text.datasets.WMT16(path, src_dict_size=5, trg_dict_size=5, lang="fr")


def test_conll05st_predicates_windows_and_labels(tmp_path):
    import gzip
    import io
    import tarfile

    def gz(text):
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb") as g:
            g.write(text.encode())
        return buf.getvalue()

    words = "The\ncat\nsat\non\nmats\n\nDogs\nbark\n\n"
    props = ("-  (A0*   (A0*\n-  *)   *)\nsit  (V*)  *\n-  (A1*  *\nmats  *)   (V*)\n\n"
             "-  (A0*)\nbark (V*)\n\n")
    path = tmp_path / "conll05st-tests.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in [("conll05st-release/test.wsj/words/test.wsj.words.gz", gz(words)),
                           ("conll05st-release/test.wsj/props/test.wsj.props.gz", gz(props))]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    files = {}
    for name, text in [("word", "<unk>\nThe\ncat\nsat\non\nbos\neos\nDogs\n"), ("verb", "sit\nbark\nmats\n"),
                       ("target", "B-A0\nI-A0\nB-A1\nI-A1\nB-V\nI-V\nO\n"), ("emb", "x")]:
        files[name] = tmp_path / name
        files[name].write_text(text)
    ds = ddg.text.datasets.Conll05st(str(path), str(files["word"]), str(files["verb"]), str(files["target"]),
                                     str(files["emb"]))
    assert len(ds) == 3 and ds.get_embedding() == str(files["emb"])
    assert ds.label_dict == {"B-A0": 0, "I-A0": 1, "B-A1": 2, "I-A1": 3, "B-V": 4, "I-V": 5, "O": 6}
    first = [a.tolist() for a in ds[0]]
    assert first[0] == [1, 2, 3, 4, 0]                       # The cat sat on mats (mats unknown)
    assert [c[0] for c in first[1:6]] == [1, 2, 3, 4, 0]     # two before 'sat' to two after
    assert first[6] == [0] * 5 and first[7] == [1] * 5       # predicate 'sit'; the window covers all
    assert first[8] == [0, 1, 4, 2, 3]                       # B-A0 I-A0 B-V B-A1 I-A1
    second = [a.tolist() for a in ds[1]]
    assert [c[0] for c in second[1:6]] == [3, 4, 0, 6, 6] and second[7] == [0, 0, 1, 1, 1]
    assert second[8] == [0, 1, 6, 6, 4]
    third = [a.tolist() for a in ds[2]]
    assert [c[0] for c in third[1:6]] == [5, 7, 0, 6, 6] and third[6] == [1, 1]
