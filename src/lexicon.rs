//! Every English word list the code reads text with, in one place: the tokenizer's
//! stopwords, the question reader's wh-words and type nouns, the extractor's name
//! connectors, the answer checks' non-answers. A list is defined once here and named by what
//! it is for; its users call the helpers or match against the slice.
//!
//! All entries are lower case; callers lower-case the word they look up.

/// Words too common to tell passages apart: left out of BM25 terms, question terms and seeds.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "both", "but", "by", "can", "could", "did", "do", "does", "during", "each", "for", "from", "had", "has", "have",
    "he", "her", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "many", "me", "more", "most",
    "much", "my", "no", "not", "of", "on", "one", "or", "other", "our", "out", "over", "she", "so", "some", "such",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to",
    "under", "until", "up", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "whose",
    "why", "will", "with", "would", "you", "your", "s", "t", "same", "name", "named",
];

/// Words ending in a dot that do not end a sentence.
pub const ABBREVIATIONS: &[&str] = &[
    "mr.", "mrs.", "ms.", "dr.", "st.", "jr.", "sr.", "vs.", "no.", "inc.", "co.", "ltd.", "mt.", "ft.", "gen.",
    "col.", "lt.", "u.s.", "e.g.", "i.e.", "etc.", "approx.", "jan.", "feb.", "aug.", "sept.", "oct.", "nov.", "dec.",
];

/// English month names: dates in answers, and words that are not entity names.
pub const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Is `word` (any case) a month name?
pub fn is_month(word: &str) -> bool {
    MONTHS.contains(&word.to_lowercase().as_str())
}

/// Words that ask: a question's wh-words, never an entity or a relation.
pub const WH_WORDS: &[&str] = &["who", "whom", "whose", "what", "which", "when", "where", "why", "how"];

/// Is `word` (any case) a wh-word?
pub fn is_wh(word: &str) -> bool {
    WH_WORDS.contains(&word.to_lowercase().as_str())
}

/// Words that open a yes/no question.
pub const YES_NO_OPENERS: &[&str] =
    &["is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would", "should"];

/// Words that may stand before the asking wh-word at the start ("In what year ...").
pub const LEADING_PREPOSITIONS: &[&str] =
    &["in", "of", "from", "for", "to", "at", "on", "by", "with", "during", "since"];

/// Words after which "which" asks rather than relates ("released in which year", "is father
/// to which actress"; but "the association which published").
pub const ASKING_BEFORE_WHICH: &[&str] = &[
    "in", "of", "from", "for", "to", "at", "on", "by", "with", "during", "since", "into", "is", "was", "are", "were",
    "and", "under", "as", "after", "before", "than", "about", "over", "between", "against", "among", "through",
    "within", "near", "across",
];

/// "how" + one of these asks for an amount.
pub const HOW_AMOUNT: &[&str] = &["many", "much", "long", "old", "far", "tall", "big", "large", "high", "often"];

/// Type nouns that ask for a date rather than an entity.
pub const DATE_NOUNS: &[&str] = &["year", "date", "century", "decade", "day", "month", "era"];

/// Type nouns that ask for an amount rather than an entity.
pub const AMOUNT_NOUNS: &[&str] =
    &["percentage", "percent", "amount", "number", "population", "size", "length", "height"];

/// "what kind of university": the noun after these is the type.
pub const KIND_NOUNS: &[&str] = &["kind", "type", "sort", "name", "form"];

/// Type nouns that ask for a place.
pub const PLACE_NOUNS: &[&str] =
    &["city", "town", "country", "state", "county", "region", "place", "village", "province", "location", "island"];

/// Past participles that do not end in "-ed", which open a reduced relative clause as often.
pub const IRREGULAR_PARTICIPLES: &[&str] =
    &["born", "known", "made", "written", "built", "held", "won", "led", "found", "sold", "seen", "taken", "given"];

/// Words that only shape a question ("both", "first", "the same"), never a relation.
pub const FRAME_WORDS: &[&str] = &[
    "both", "also", "first", "last", "same", "known", "called", "located", "based", "type", "kind", "year", "many",
    "much", "date", "time", "people",
];

/// Irregular English forms, so that "built" meets "build" and "born" meets "birth", and the
/// nouns a relation goes by ("author" states "wrote", "wife" states "spouse").
pub const LEMMAS: &[(&str, &str)] = &[
    ("author", "write"),
    ("authored", "write"),
    ("writer", "write"),
    ("wife", "spouse"),
    ("husband", "spouse"),
    ("married", "spouse"),
    ("marry", "spouse"),
    ("marriage", "spouse"),
    ("named", "name"),
    ("owner", "own"),
    ("owned", "own"),
    ("owns", "own"),
    ("built", "build"),
    ("born", "birth"),
    ("wrote", "write"),
    ("written", "write"),
    ("sang", "sing"),
    ("sung", "sing"),
    ("made", "make"),
    ("won", "win"),
    ("led", "lead"),
    ("died", "death"),
    ("dead", "death"),
    ("die", "death"),
    ("began", "begin"),
    ("begun", "begin"),
    ("held", "hold"),
    ("taught", "teach"),
    ("bought", "buy"),
    ("sold", "sell"),
    ("spoke", "speak"),
    ("grew", "grow"),
    ("found", "find"),
];

/// Suffixes a stem drops, longest first.
pub const SUFFIXES: &[&str] = &["ations", "ation", "ings", "ing", "ers", "ors", "ed", "er", "or", "es", "s"];

/// Numbers written as words.
pub const NUMBER_WORDS: &[&str] = &[
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "hundred",
    "thousand", "million", "billion",
];

/// How often, in one word.
pub const COUNT_WORDS: &[&str] = &["once", "twice", "thrice"];

/// Periods a date can name ("the 19th century").
pub const PERIODS: &[&str] = &["century", "centuries", "millennium"];

/// Words that qualify a period ("early twentieth century").
pub const PERIOD_QUALIFIERS: &[&str] = &["early", "mid", "late"];

/// Words a date may hold besides numbers, months and periods ("March 2 and 3", "300 BC").
pub const DATE_JOINERS: &[&str] = &["and", "bc", "ad", "bce", "ce", "of", "the"];

/// Ordinals written as words.
pub const ORDINALS: &[&str] = &[
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
    "twenty-first",
];

/// Words that scale a number into an amount ("150 million", "12 percent").
pub const SCALES: &[&str] = &["hundred", "thousand", "million", "billion", "trillion", "percent", "%"];

/// Words in a passage that show it is about a person.
pub const PERSON_WORDS: &[&str] = &["he", "she", "his", "her", "born"];

/// Of [`PERSON_WORDS`], those no passage about a thing says: a one-word title is a person's
/// only when its passage says one.
pub const BIRTH_WORDS: &[&str] = &["born"];

/// Personal pronouns that stand for a passage's subject.
pub const PRONOUNS: &[&str] = &["he", "she", "it", "they", "his", "her", "its", "their"];

/// Name suffixes a title may leave out ("Hank Williams" for "Hank Williams, Jr.").
pub const NAME_SUFFIXES: &[&str] = &["jr", "sr", "ii", "iii", "iv"];

/// Words that may join capitalised words inside one name ("University of Copenhagen").
pub const NAME_CONNECTORS: &[&str] = &["of", "de", "and", "the", "for", "von", "van", "der", "du", "la", "del", "&"];

/// Prepositions of place: the word before a span they put somewhere ("born in Tromsø").
pub const PLACE_PREPOSITIONS: &[&str] = &["in", "at", "near", "from", "outside"];

/// Words of a comparison that ask for the earlier of two.
pub const EARLIER: &[&str] = &["first", "earlier", "earliest", "older", "oldest", "before", "sooner"];

/// Words of a comparison that ask for the later of two.
pub const LATER: &[&str] = &["last", "later", "latest", "younger", "youngest", "recent", "newer", "newest"];

/// Articles, which no answer or name comparison counts.
pub const ARTICLES: &[&str] = &["a", "an", "the"];

/// Words that open a relative clause describing the noun before them ("the city where ...").
pub const RELATIVES: &[&str] = &["that", "which", "who", "whom", "whose", "where", "when"];

/// The copulas that call a name by a noun ("X is a port").
pub const COPULAS: &[&str] = &["is", "was", "are", "were"];

/// Words that measure rather than name: an answer made of one of these (with a number or
/// alone) is a unit, not the thing asked for ("kilometres", "UTC+2").
pub const UNITS: &[&str] = &[
    "km",
    "kilometre",
    "kilometres",
    "kilometer",
    "kilometers",
    "mile",
    "miles",
    "metre",
    "metres",
    "meter",
    "meters",
    "foot",
    "feet",
    "ft",
    "inch",
    "inches",
    "kg",
    "kilogram",
    "kilograms",
    "pound",
    "pounds",
    "lb",
    "tonne",
    "tonnes",
    "ton",
    "tons",
    "hectare",
    "hectares",
    "acre",
    "acres",
    "litre",
    "litres",
    "liter",
    "liters",
    "second",
    "seconds",
    "minute",
    "minutes",
    "hour",
    "hours",
    "degree",
    "degrees",
    "percent",
    "mph",
    "kmh",
];

/// Time zone abbreviations that are no English word: one in an answer makes it a time zone
/// ("UTC+2"), which answers "what time zone" only.
pub const TIME_ZONES: &[&str] =
    &["utc", "gmt", "cet", "cest", "eet", "eest", "edt", "cdt", "mdt", "pdt", "pst", "aest", "aedt", "jst"];

/// Endings of a nationality adjective ("Australian", "Japanese", "Swedish", "Thai" aside): an
/// adjective answers "which nationality" or "what language", never what a thing is of.
pub const DEMONYM_ENDINGS: &[&str] = &["ian", "ean", "an", "ese", "ish", "ic", "i"];

/// Type nouns an adjective of nationality answers.
pub const NATIONALITY_NOUNS: &[&str] =
    &["nationality", "language", "ethnicity", "origin", "citizenship", "descent", "heritage", "cuisine", "style"];

/// Nouns that end in "s" in the singular: a question asking for one is no list.
pub const SINGULARS_IN_S: &[&str] = &[
    "series",
    "species",
    "news",
    "headquarters",
    "means",
    "lens",
    "gas",
    "canvas",
    "alias",
    "atlas",
    "chaos",
    "works",
];

/// Is `word` (any case) in `list`?
pub fn contains(list: &[&str], word: &str) -> bool {
    list.contains(&word.to_lowercase().as_str())
}
