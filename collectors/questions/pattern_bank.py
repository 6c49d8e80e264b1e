"""The criticality gate's default pattern bank: which questions are character-level.

The default bank covers character-level questions, the ones a model answers from the
tokens it sees rather than the letters inside them, in five families:

* ``spelling``: how a word is written ("how do you spell 'necessary'", "the 3rd letter
  of banana", "which month is spelled with an X").
* ``counting``: letters, vowels, syllables or words in a given text ("how many r's in
  strawberry", "count the words in: ...").
* ``containment``: which letters a word has and where ("is there any month whose name
  contains a Z", "which states start and end with the same letter").
* ``length``: words compared by their number of letters ("which of these words has the
  most letters", "the longest country name").
* ``wordplay``: letters reordered or edited ("spell 'necessary' backwards", anagrams,
  palindromes, alphabetical order, "swap 'l' and 'b' in 'alphabet'").

It stays quiet on ordinary questions that share the vocabulary ("which flight is
cheaper", "what letter grade did I get", "how many bags can I bring", "reverse the
charge"). The seed's broad ``which_what`` family is opt-in, as
:data:`WHICH_WHAT_PATTERNS` (see there for why).

Every pattern here is built with ``compile_now=False``: it compiles the first time a gate
tries it, so importing the hooks does not pay for twenty-odd regexes.
"""

from __future__ import annotations

from functools import partial

from .criticality_pattern import CriticalityPattern, ReasoningDepth

__all__ = ["DEFAULT_PATTERNS", "WHICH_WHAT_PATTERNS"]

# The shipped bank compiles on first use; tests/unit/test_verification.py compiles it all.
_pattern = partial(CriticalityPattern, compile_now=False)

_V = ReasoningDepth.VERIFY
_S = ReasoningDepth.STANDARD

# -- vocabulary --------------------------------------------------------------------------
# What makes a question character-level is that it asks about the letters inside words:
# which letters a word has and where, how many, how long the word is, or the word with
# its letters reordered. The families below are relations over a small vocabulary (a
# named letter, a unit of text, a quoted word), not one pattern per example sentence.
#
# Every quantifier is either bounded ({0,40}) or follows a literal word, so a search
# costs at most a constant amount of work per character: no pattern can backtrack into
# quadratic time, however adversarial the text.

# Units that only exist inside words. "characters" and "words" are also people in a
# story and parts of a language, and "letters" are also mail, so those need a text to
# be counted in (see _TEXT); "digits" is left out: "how many digits is the card number"
# is form filling.
_LETTER_UNITS = r"(?:letters|vowels|consonants|syllables)"
_TEXT_UNITS = r"(?:characters|chars|words|sentences)"
# Quotes: an opening quote not glued to a letter before it, a closing one not glued to a
# letter after it (but "'r's" is fine), so the apostrophes of "I'm ... don't" never
# read as a quoted word.
_OPEN = r"""(?<![a-z0-9])['"]"""
_CLOSE = r"""['"](?!(?!s\b)[a-z])"""
# A letter in quotes: 'x', "r". A longer quoted sequence is a word ("including 'Age'").
_QUOTED_LETTER = rf"{_OPEN}[a-z]{_CLOSE}"
# A short letter sequence in quotes, where the frame makes it letters: "ends with 'mt'".
_QUOTED_LETTERS = rf"{_OPEN}[a-z]{{1,3}}{_CLOSE}"
# A quoted word or phrase: 'necessary', "hello world" (bounded, and never across lines).
_QUOTED_WORD = rf"""{_OPEN}[^'"\n]{{1,40}}{_CLOSE}"""
_CLAUSE_END = r"""[ \t]{0,3}(?:[?.!,;:)"\n]|$)"""
# A bare letter counts only where the clause ends or a word that continues a letter
# question follows ("starts with Q?", "has an x in it", "the letter e appears"); so "the
# letter I sent", "start with a demo" and "I'll go with B for the seat" stay quiet.
_LETTER_END = (rf"(?={_CLAUSE_END}"
               r"|\s(?:in|and|or|at|twice|once|appears?|occurs?|shows?|anywhere)\b)")
# "the letter x", "letters 'a' and 'b'", "letter r": naming a letter is about the alphabet
# whatever the verb; a document, a grade or a letter of credit is never followed by a
# single letter.
_NAMED_LETTER = rf"\bletters?\s(?:{_QUOTED_LETTERS}|[a-z]{_LETTER_END})"
_VOWEL = r"(?:vowels?|consonants?|double\sletters?|the\ssame\s(?:first\s|last\s)?letter)"
# Any way of pointing at a letter after a verb that is about letters (contains, starts).
_LETTER = rf"(?:{_NAMED_LETTER}|{_QUOTED_LETTER}|\b{_VOWEL}\b|\b[a-z]{_LETTER_END})"
# After everyday verbs (has, with) a bare letter needs an article or "no", because "pay
# with B" and "go with A" choose an option.
_ARTICLE_LETTER = rf"(?:an?|any|no)\s[a-z]{_LETTER_END}"
# A letter being counted: "how many e does it have", "the number of 'r' in", "count the c
# letters", "count the a?". A counting word followed by a lone letter is about letters;
# "is", "as" and "us" are words, so "how many of us" and "number of is" stay quiet.
_COUNTED_LETTER = (rf"(?:{_QUOTED_LETTER}(?:'?s)?|(?!is\b|as\b|us\b)[a-z](?:'?s)?\b)"
                   r"(?=\s(?:letters?|in|appears?|occurs?|does|do|are\sin|are\sthere)\b"
                   rf"|{_CLAUSE_END})")
# Nouns for a piece of text whose letters a question can be about.
_TEXT_NOUN = (r"(?:words?|names?|strings?|sentences?|phrases?|texts?|paragraphs?|titles?"
              r"|alphabet|passwords?|usernames?|messages?|lines?|answers?|spellings?"
              r"|acronyms?|tweets?)")
# The text a count is taken in: a quoted word, "the word ...", "this sentence", "this:",
# "it", or for letter units a bare word ("in strawberry"). "the mail", "the English
# language" and "Game of Thrones" are not texts.
_DETERMINER = r"(?:the|this|that|these|those|my|your|our|his|her|their|each|every|an?)"
# The noun phrase must end at the text noun: "the name field limit" is a form field.
_TEXT_NOUN_END = (rf"(?={_CLAUSE_END}|\s(?:in|of|and|or|has|have|does|do|is|are|was"
                  r"|contains?|that|below|above|here)\b|\s['\"]"
                  rf"|\s[a-z]{{2,30}}(?:{_CLAUSE_END}|\s(?:has|have|contains?)\b))")
_TEXT = (rf"(?:{_QUOTED_WORD}|\b{_DETERMINER}\s(?:\w{{1,20}}\s){{0,2}}?{_TEXT_NOUN}\b"
         rf"{_TEXT_NOUN_END}"
         rf"|\b(?:this|that|it|these|the\sfollowing)(?={_CLAUSE_END}))")
_BARE_WORD = (rf"\b(?!{_DETERMINER}\b|(?:total|all|there|it|them|i|you|u|we|they|he|she)\b)"
              r"[a-z]{2,30}\b")
# "how many capital letters", "count the silent letters".
_KIND = (r"(?:double\s|distinct\s|unique\s|different\s|capital\s|uppercase\s|lowercase\s"
         r"|silent\s|repeated\s)")
# How a count is linked to its text: "are there in", "does", "is".
_IN = r"(?:(?:are\s|is\s|were\s)?(?:there\s)?(?:in|of|does|do)\s)"
_IS = r"(?:(?:are|is|were)\s(?:there\s)?)"
_ORDINAL = (r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last"
            r"|middle|final|next|penultimate|\d{1,3}(?:st|nd|rd|th))")
_SMALL_NUMBER = r"(?:\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
# Nouns whose spelling (not meaning) a question can be about.
_WORD_NOUN = r"(?:words?|names?|spellings?|strings?|palindromes?|anagrams?|acronyms?)"
# A word a spelling question is about: quoted, "the word ...", or one bare word that
# ends the clause ("how do you spell rhythm?"), never "my name".
_WORD_REF = (rf"(?:{_QUOTED_WORD}|\bthe\s(?:word|plural|past\stense)\b"
             rf"|\b(?!{_DETERMINER}\b)[a-z]{{2,30}}(?={_CLAUSE_END}|\s(?:for\sme|backwards?"
             r"|in\sreverse|letter\sby\sletter|one\sletter|out\b|right\b|correctly\b)))")
# Lead-ins that make "spell" a request to the model rather than a noun ("spell check",
# "the fireball spell") or the user spelling something out ("let me spell it").
_ASK = (r"(?:please|pls|plz|can\su|can\syou|could\syou|would\syou|will\syou|to|and|now"
        r"|then|just)")
_WHO = r"(?:you|u|i|we|one|people|they|americans|brits)"
# An identifier is not a word: "my user ID starts with J" is a lookup hint.
_NOT_AFTER_ID = r"(?<!\bid\s)(?<!\bcode\s)(?<!number\s)(?<!\bpin\s)(?<!password\s)"
# "Let's start with A", "I'd like to begin with B": the user picking an option.
_NOT_A_CHOICE = r"(?<!'s\s)(?<!\bto\s)(?<!\bus\s)(?<!\bi\s)(?<!\bwe\s)(?<!'ll\s)(?<!please\s)"

DEFAULT_PATTERNS: tuple[CriticalityPattern, ...] = (
    # -- spelling: how a word is written, letter by letter -----------------------------
    # First, so the October question reports this pattern (the scanner's contract).
    _pattern("spelling", r"\bspel(?:led|t|ls?)\s+with(?:out)?\b", _V, 0.9,
                       anchors=("spel",)),
    # "how do you spell", "how to spell", "how is 'liaison' spelled".
    _pattern(
        "spelling",
        rf"\bhow\s(?:to\s|(?:do|does|did|would|should|can|could|will)\s{_WHO}\s"
        rf"(?:\w{{1,12}}\s)?)spell?\b(?!\s?-?check)"
        rf"|\bhow\s(?:is|are|was|were)\s(?:{_QUOTED_WORD}|the\sword\s\w{{1,30}}|[a-z]{{2,30}})"
        r"\sspel(?:led|t)\b",
        _V, 0.9,
        anchors=("spel",)),
    # "the correct spelling of 'x'", "is recieve spelled right", "spelled 'a' or 'b'".
    _pattern(
        "spelling",
        rf"\b(?:spelling\s(?:of|for)\s|(?:correct|right|proper|british|american|us|uk)"
        rf"\sspelling\s(?:of\s|for\s|is\s)?){_WORD_REF}"
        rf"|\b(?:is|are|was)\s(?:it\s|this\s|{_QUOTED_WORD}\s|[a-z]{{2,30}}\s)spel(?:led|t)"
        rf"\s(?:right|correctly|wrong|incorrectly|properly|like|as\b|{_QUOTED_WORD})",
        _V, 0.9,
        anchors=("spel",)),
    # "spell rhythm for me", "Spell the word 'bureaucracy'", "can you spell 'x'".
    _pattern(
        "spelling",
        rf"(?:^|[.!?;:\n]|\b{_ASK}\s)[ \t]{{0,3}}spell\s(?:out\s|back\s)?{_WORD_REF}",
        _V, 0.9,
        anchors=("spell",)),
    # "the 3rd letter of", "last two letters in", "whose first letter is 'b'", "the third
    # character in 'pneumonia'" (a character of a quoted word: "the first character of my
    # password" is form filling).
    _pattern(
        "spelling",
        rf"\b{_ORDINAL}\s(?:{_SMALL_NUMBER}\s)?letters?\s(?:of\b|in\b"
        rf"|(?:is|are|being|should\sbe|must\sbe)\s(?:the\sletter\s|an?\s)?"
        rf"(?:{_QUOTED_LETTERS}|[a-z]{_LETTER_END}|vowel|consonant))"
        rf"|\b{_ORDINAL}\s(?:{_SMALL_NUMBER}\s)?characters?\s(?:of|in)\s{_QUOTED_WORD}",
        _V, 0.9,
        anchors=("letter", "character")),
    # -- counting: letters, vowels, syllables or words in a given text -----------------
    # "how many letters are in strawberry", "how many vowels does 'queue' have", "how many
    # words are in this sentence"; not "how many characters can a tweet have", "how many
    # letters are in the mail" or "how many words should my cover letter be".
    _pattern(
        "counting",
        rf"\bhow\smany\s{_KIND}?(?:{_LETTER_UNITS}\s{_IN}{_BARE_WORD}"
        rf"|(?:{_LETTER_UNITS}|{_TEXT_UNITS})\s(?:{_IN}|{_IS})?(?:{_TEXT}|long\b))",
        _V, 0.9,
        anchors=("many",)),
    # A lone letter after a counting word: "how many r's", "how many Rs in strawberry",
    # "number of e in", "the frequency of 'a' in", "count the c letters", "has how many a".
    _pattern(
        "counting",
        r"\b(?:how\smany|count|counting|tally|number|frequency|occurrences?|instances?)\s"
        rf"(?:up\s|how\smany\s)?(?:of\s)?(?:the\s|all\s(?:the\s)?)?(?:letters?\s)?"
        rf"{_COUNTED_LETTER}",
        _V, 0.9,
        anchors=("many", "count", "tally", "number", "frequen", "occurrence", "instance")),
    _pattern(
        "counting",
        rf"\bhow\s(?:many\stimes|often)\s(?:does|do|did|is|are|will|would|can)\s"
        rf"(?:the\s(?:letter|character|word|string|substring|sequence|vowel)\b"
        rf"|{_QUOTED_WORD}|[a-z]\s(?:appear|occur|show|in\b))",
        _V, 0.9,
        anchors=("many", "often")),
    # "count the vowels", "count the words in: ...", "'necessary' has how many letters".
    _pattern(
        "counting",
        rf"\b(?:count|tally)\s(?:up\s)?(?:how\smany\s|the\s|all\s(?:the\s)?)?"
        rf"(?:number\sof\s)?{_KIND}?(?:{_LETTER_UNITS}\b(?!\s(?:to|from|for|that|we|i|you)\b)"
        rf"|{_TEXT_UNITS}\s(?:in|of)\s?(?::|{_TEXT})|occurrences\sof\b|instances\sof\b)"
        rf"|\b(?:has|have)\show\smany\s(?:{_LETTER_UNITS}\b|{_COUNTED_LETTER})",
        _V, 0.9,
        anchors=("count", "tally", "many")),
    _pattern(
        "counting",
        rf"\b(?:number\sof\s(?:{_LETTER_UNITS}\s(?:in|of|per|does)\b|{_TEXT_UNITS}\s(?:in|of)"
        rf"\s{_TEXT})"
        rf"|(?:letter|character|char|word|syllable|vowel|consonant)\scounts?\b(?!\slimit)"
        rf"|(?:most|least)\s(?:common|frequent|used|repeated)\sletters?\b)",
        _V, 0.9,
        anchors=("number", "count", "letter")),
    # -- containment: which letters a word has, and where ------------------------------
    # "contains a Z", "contain the letter 'r'", "doesn't contain an E".
    _pattern(
        "containment",
        rf"\bcontain(?:s|ing|ed)?\s(?:the\s|an?\s|any\s|no\s|only\s)?{_LETTER}"
        # "does 'banana' contain two n's": a count of one letter.
        rf"|\bcontain(?:s|ing|ed)?\s(?:exactly\s|only\s)?{_SMALL_NUMBER}\s{_COUNTED_LETTER}",
        _V, 0.85,
        anchors=("contain",)),
    # "starts with Q", "end in the letter y", "start and end with the same letter",
    # "begins with a vowel", "ends with 'mt'".
    _pattern(
        "containment",
        # The lookahead first: the lookbehinds then run at verbs only, not at every char.
        rf"\b(?=start|begin|end){_NOT_AFTER_ID}{_NOT_A_CHOICE}(?:start|begin|end)(?:s|ed|ing)?\s"
        rf"(?:and\s(?:start|begin|end)(?:s|ed|ing)?\s)?"
        rf"(?:with|in|on)\s(?:the\s|an?\s)?(?:{_LETTER}|{_QUOTED_LETTERS})",
        _V, 0.85,
        anchors=("start", "begin", "end")),
    # "has an X in it", "with the letter q", "without the letter e", "have no letter r".
    _pattern(
        "containment",
        rf"\b(?:has|have|had|having|with|without|includes?|including|uses?|using|lacks?)\s"
        rf"(?:(?:the\s|an?\s|any\s|no\s|only\s)?(?:{_NAMED_LETTER}|{_QUOTED_LETTER}"
        rf"|\b{_VOWEL}\b)|an?\s[a-z]\sin\b"
        # "with" also follows "starts" ("my ID starts with a J"): there a bare letter only
        # counts "in it", as above.
        rf"|(?<!\bwith\s){_ARTICLE_LETTER})",
        _V, 0.85,
        anchors=("has", "have", "had", "having", "includ", "use", "using", "lack", "with")),
    # "Is there a 'q' in Iraq?", "the letter k appear in", "what letter does it start
    # with", "which letter comes third".
    _pattern(
        "containment",
        rf"\b(?:(?:is|are)\sthere\s(?:an?\s|any\s)?(?:{_QUOTED_LETTER}|[a-z]\sin\b)"
        rf"|{_NAMED_LETTER}\s?(?:appears?|appearing|occurs?|occurring|shows?\sup)\b"
        rf"|(?:what|which)\sletters?\s(?:does|is|are|comes?|appears?|occurs?|begins?"
        rf"|starts?|ends?|do\s(?!(?:i|you|we|they)\b)))",
        _V, 0.85,
        anchors=("there", "letter")),
    # -- length: words compared or ranked by their number of letters --------------------
    _pattern(
        "length",
        rf"\b(?:(?:most|fewest|least|more|fewer|less)\s(?:than\s{_SMALL_NUMBER}\s)?"
        rf"{_LETTER_UNITS}|same\s(?:number\s|amount\s)(?:of\s){_LETTER_UNITS})\b",
        _V, 0.85,
        anchors=("letters", "vowels", "consonants", "syllables")),
    # "the longest name", "shortest English word", "which word is longer", "is 'queue'
    # shorter than 'quiet'"; not "longest river", "shortest path" or "longer than a day".
    _pattern(
        "length",
        rf"\b(?:longest|shortest|longer|shorter)\s(?:\w{{1,20}}\s)?{_WORD_NOUN}\b"
        rf"|\bwhich\s(?:word|name)\s(?:is|was)\s(?:the\s)?(?:longer|shorter|longest|shortest)\b"
        rf"|{_QUOTED_WORD}\s(?:is\s)?(?:longer|shorter)\sthan\b"
        rf"|\b(?:longer|shorter)\sthan\s{_QUOTED_WORD}"
        # "which is longer, 'elephant' or 'hippopotamus'": single quoted words compared.
        rf"|\b(?:which|what)\s(?:one\s)?is\s(?:the\s)?(?:longer|shorter|longest|shortest)\b"
        rf"[^?.!\n]{{0,20}}?{_OPEN}[a-z]{{2,30}}{_CLOSE}",
        _V, 0.85,
        anchors=("longe", "shorte")),
    # A length in letters: "7-letter word", "9 letters long", "exactly 5 letters", "sort
    # these words by number of letters".
    _pattern(
        "length",
        rf"\b{_SMALL_NUMBER}[-\s]letters?\s(?:\w{{1,20}}\s)?(?:words?|names?)\b"
        rf"|\b(?:{_SMALL_NUMBER}|many)\s{_LETTER_UNITS}\slong\b"
        rf"|\b(?:exactly|only|at\sleast|at\smost|more\sthan|fewer\sthan|less\sthan|with)\s"
        rf"{_SMALL_NUMBER}\s{_LETTER_UNITS}\b(?!\s(?:of|to|from|for)\b)"
        # "a country whose name has 5 letters"; a word's length, not the alphabet's 26.
        rf"|\b(?:has|have)\s(?:[1-9]|1[0-5]|one|two|three|four|five|six|seven|eight|nine"
        rf"|ten|eleven|twelve)\s{_LETTER_UNITS}\b(?!\s(?:of|to|from|for)\b)"
        rf"|\b(?:words|names)\b[^.?!\n]{{0,30}}?\bby\s(?:their\s)?number\sof\sletters",
        _V, 0.85,
        anchors=("letter", "vowel", "consonant", "syllable")),
    # "how long is the word", "the length of the string", "sort these words by length".
    _pattern(
        "length",
        r"\bhow\slong\sis\s(?:the\s|this\s)?(?:word|string)\b"
        r"|\blength\sof\s(?:the\s|this\s|each\s)?(?:word|string)"
        r"|\b(?:words|names)\b[^.?!\n]{0,30}?\bby\s(?:their\s)?length",
        _V, 0.85,
        anchors=("long", "length")),
    # -- wordplay: letters reordered or transformed -------------------------------------
    _pattern(
        "wordplay",
        r"\b(?:anagram|palindrom|pangram|isogram|lipogram|acrostic|alphabeti[sz]|alphabetic"
        r"|rot-?13\b|caesar\scipher|pig\slatin\b|levenshtein|edit\sdistance)",
        _V, 0.9,
        anchors=("anagram", "palindrom", "pangram", "isogram", "lipogram", "acrostic",
                 "alphabe", "rot13", "rot-13", "caesar", "latin", "levenshtein", "distance")),
    # Reversal of a text, not of a charge or a booking: "spell 'necessary' backwards",
    # "'drawer' backwards", "reverse the word 'desserts'", "the string ... reversed",
    # "write the sentence backwards"; not "the charge was reversed".
    _pattern(
        "wordplay",
        rf"(?:\bspel(?:l|ls|led|lt|t|ling)?\b|{_QUOTED_WORD})[^.?!\n]{{0,40}}?"
        rf"\b(?:backwards?|reversed|in\sreverse)\b"
        rf"|\b(?:strings?|letters|characters|words?|names?|sentences?|phrases?|texts?"
        rf"|alphabet)\s"
        rf"(?:(?!was\b|were\b|is\b|are\b|been\b|got\b|be\b)\w{{1,20}}\s)?"
        rf"(?:backwards?|reversed|in\sreverse)\b"
        rf"|\brevers(?:e|ed|ing)\s(?:the\s|this\s|that\s|these\s)?(?:{_QUOTED_WORD}"
        rf"|(?:words?|strings?|letters|characters|spellings?)\b"
        rf"|order\sof\s(?:the\s)?(?:letters|characters|words)"
        rf"|(?:letter|character|alphabetical)\sorder)",
        _V, 0.9,
        anchors=("backward", "revers")),
    # "unscramble these letters", "rearrange the letters", "every other letter", "replace
    # every vowel", "what letter comes after P in the alphabet".
    _pattern(
        "wordplay",
        rf"\b(?:unscrambl\w{{0,3}}|rearrang\w{{0,3}}|scrambled?|jumbled?)\s"
        rf"(?:the\s|these\s|this\s|those\s)?(?:letters|words?\b|{_QUOTED_WORD}|:)"
        rf"|\b(?:every|each)\s(?:other|second|third|\d{{1,2}}(?:st|nd|rd|th))\s"
        rf"(?:letter|vowel|consonant|character)s?\b"
        rf"|\b(?:every|each|all\sthe)\s(?:vowel|consonant)s?\b"
        rf"|\bletters?\b[^.?!\n]{{0,30}}?\bin\sthe\salphabet\b",
        _V, 0.9,
        anchors=("scrambl", "rearrang", "jumbl", "every", "each", "vowel", "consonant",
                 "alphabet")),
    # Letter edits: "swap 'l' and 'b' in", "add an 'e' after every 'a'", "remove the
    # vowels from", "delete every 'e' in". The letter must be quoted or named: "add B to
    # my booking" is not an edit of a word.
    _pattern(
        "wordplay",
        rf"\b(?:add|insert|append|prepend|delete|remove|drop|swap|replace|substitute|change"
        rf"|switch|double|capitali[sz]e|uppercase|lowercase)\s"
        rf"(?:(?:an?|the|every|each|all(?:\sthe)?|all\sof\sthe)\s)?(?:instances?\sof\s)?"
        rf"(?:{_QUOTED_LETTER}|{_NAMED_LETTER}|(?:vowel|consonant)s?\b)"
        rf"[^.?!\n]{{0,30}}?\b(?:in|from|of|with|and|after|before|to)\b",
        _V, 0.9,
        anchors=("'", '"', "letter", "vowel", "consonant")),
)

# The seed's Wire 1 fix: every "which X is/has ...", "what X was/in ..." question, at
# weight 0.4 and STANDARD depth (CriticalityGate(min_score=0.5) mutes it again). On the
# 3,500 real user messages of the dev data it fired on 9, none of them a trick question
# ("which flights are over 3 hours", "what time is it in London"), and the families above
# now catch the October question that motivated it, so it is no longer in the default
# bank. Opt in where a reasoning pass on every factual which/what question is worth its
# cost: ``CriticalityGate(DEFAULT_PATTERNS + WHICH_WHAT_PATTERNS)``.
WHICH_WHAT_PATTERNS: tuple[CriticalityPattern, ...] = (
    _pattern(
        "which_what",
        r"\bwhich\s+(?!(?:it|this|that|these|those|one|ones)\b)\w+\s+"
        r"(?:is|has|was|are|were|does)\b",
        _S, 0.4),
    _pattern(
        "which_what",
        r"\bwhat\s+(?!(?:it|this|that|these|those|he|she|they|we|you|i|else|there|here)\b)"
        r"\w+\s+(?:is|has|was|are|were|does|in)\b",
        _S, 0.4),
)
