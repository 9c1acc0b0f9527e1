"""``Movielens``: the MovieLens 1M ratings (``ml-1m.zip``). Each item is ``[user id],
[gender: 0 male, 1 female], [age group], [job], [movie id], [category ids], [title word
ids], [rating * 2 - 5]``; a rating goes to the test split when the ``rand_seed``-seeded
numpy stream draws below ``test_ratio`` for it, as Paddle's does (the same split, without
reseeding numpy's global generator). Category and title-word ids are given in sorted
order (Paddle numbers them in the iteration order of a Python set, which changes from
run to run)."""
import re
import zipfile

import numpy as np

from ...io.dataset import Dataset
from ...vision.datasets._common import check_mode, locate

URL = "https://dataset.bj.bcebos.com/movielens%2Fml-1m.zip"
MD5 = "c4d9eecfca2ab87c1945afe126590906"
age_table = [1, 18, 25, 35, 45, 50, 56]
WHO = "ddg.text.datasets.Movielens"


class MovieInfo:
    """A movie's id, title and categories."""

    def __init__(self, index, categories, title):
        self.index, self.categories, self.title = int(index), categories, title

    def value(self, categories_dict, movie_title_dict):
        return [[self.index], [categories_dict[c] for c in self.categories],
                [movie_title_dict[w.lower()] for w in self.title.split()]]

    def __repr__(self):
        return f"<MovieInfo id({self.index}), title({self.title}), categories({self.categories})>"


class UserInfo:
    """A user's id, gender, age group and job."""

    def __init__(self, index, gender, age, job_id):
        self.index = int(index)
        self.is_male = gender == "M"
        if int(age) not in age_table:
            raise ValueError(f"{WHO}: user {index} has age {age}, which is not one of {age_table}")
        self.age = age_table.index(int(age))
        self.job_id = int(job_id)

    def value(self):
        return [[self.index], [0 if self.is_male else 1], [self.age], [self.job_id]]

    def __repr__(self):
        return (f"<UserInfo id({self.index}), gender({'M' if self.is_male else 'F'}), age({age_table[self.age]}), "
                f"job({self.job_id})>")


def _lines(package, name):
    try:
        with package.open(name) as f:
            return [line.decode("latin-1").strip() for line in f]
    except KeyError:
        raise ValueError(f"{WHO}: the archive has no member {name!r}") from None


class Movielens(Dataset):
    def __init__(self, data_file=None, mode="train", test_ratio=0.1, rand_seed=0, download=True):
        self.mode = check_mode(mode, ("train", "test"), WHO)
        self.data_file = locate(data_file, URL, MD5, "movielens", download, WHO)
        self.test_ratio, self.rand_seed = test_ratio, rand_seed
        try:
            package = zipfile.ZipFile(self.data_file)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ValueError(f"{WHO}: {self.data_file!r} is not a readable zip archive ({exc})") from None
        with package:
            movies = _lines(package, "ml-1m/movies.dat")
            users = _lines(package, "ml-1m/users.dat")
            ratings = _lines(package, "ml-1m/ratings.dat")
        title = re.compile(r"^(.*)\((\d+)\)$")
        self.movie_info, words, cats = {}, set(), set()
        for line in movies:
            if not line:
                continue
            movie_id, name, categories = line.split("::")
            categories = categories.split("|")
            m = title.match(name)
            name = m.group(1) if m else name
            self.movie_info[int(movie_id)] = MovieInfo(movie_id, categories, name)
            cats.update(categories)
            words.update(w.lower() for w in name.split())
        self.movie_title_dict = {w: i for i, w in enumerate(sorted(words))}
        self.categories_dict = {c: i for i, c in enumerate(sorted(cats))}
        self.user_info = {}
        for line in users:
            if line:
                uid, gender, age, job, _ = line.split("::")
                self.user_info[int(uid)] = UserInfo(uid, gender, age, job)
        split = np.random.RandomState(rand_seed)
        is_test = self.mode == "test"
        self.data = []
        for line in ratings:
            if not line:
                continue
            if (split.random_sample() < test_ratio) != is_test:
                continue
            uid, mov_id, rating, _ = line.split("::")
            usr, mov = self.user_info[int(uid)], self.movie_info[int(mov_id)]
            self.data.append(usr.value() + mov.value(self.categories_dict, self.movie_title_dict)
                             + [[float(rating) * 2 - 5.0]])

    def __getitem__(self, idx):
        return tuple(np.array(d) for d in self.data[idx])

    def __len__(self):
        return len(self.data)
