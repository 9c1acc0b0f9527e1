"""``ParamAttr``: how a layer creates one of its parameters."""


class ParamAttr:
    def __init__(self, name=None, initializer=None, learning_rate=1.0, regularizer=None, trainable=True,
                 do_model_average=True, need_clip=True):
        self.name = name
        self.initializer = initializer
        self.learning_rate = learning_rate
        self.regularizer = regularizer
        self.trainable = trainable
        self.need_clip = need_clip
        self.do_model_average = do_model_average

    @staticmethod
    def _to_attr(arg):
        """None or True -> default ParamAttr; False -> False (no parameter); str -> named;
        initializer -> wrapped."""
        if arg is None or arg is True:          # Paddle accepts bias_attr=True: the default bias
            return ParamAttr()
        if arg is False:
            return False
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if callable(arg):
            return ParamAttr(initializer=arg)
        raise TypeError(f"ddg: cannot use {arg!r} as a ParamAttr")

    def __repr__(self):
        return f"ParamAttr(name={self.name!r}, learning_rate={self.learning_rate}, trainable={self.trainable})"
