"""Read a text folder, fit, save the model with its vocabulary, load it, code new text."""
import stc
from stc import STC
from stc.readers import load_corpus

corpus = load_corpus("news/train", min_df=2)    # text folder, SVMlight or Matrix Market
model = STC(n_topics=10, random_state=0).fit(corpus.data)
model.save("news.stc", vocabulary=corpus.vocabulary, text_options=corpus.text_options)

model = stc.load("news.stc")                    # checks version and checksum, runs no code
new = load_corpus("news/test", model=model)     # read into the model's terms
theta = model.transform(new.data)
print(f"{new.data.shape[0]} documents coded on {theta.shape[1]} topics; "
      f"{(theta == 0).mean():.3f} of the document codes are zero")
