use super::*;
use crate::control::answer::Check;
use crate::control::checks::cited::lines;
use crate::control::checks::{run, span};
use crate::retrieve::testing::retrieval;

const HALDEN: (&str, &str) = (
    "Halden Optics",
    "Halden Optics was founded by Ingrid Halden in 1961. The company built the Aurora Observatory and later supplied mirrors to the Northern Lights Array.",
);
const Q: &str = "Who founded the company that built the Aurora Observatory?";

fn adequate(question: &str, answer: &str, passages: &[(&str, &str)]) -> crate::control::answer::Verdict {
    run(Check::Adequacy, question, &span(answer, &[0], Vec::new()), Some(&retrieval(passages)))
}

#[test]
fn adequacy_rejects_the_wrong_type_a_copy_of_the_question_and_a_sentence() {
    let when = "When was Halden Optics founded?";
    assert!(adequate(when, "1961", &[HALDEN]).pass);
    let v = adequate(when, "Ingrid Halden", &[HALDEN]);
    assert!(!v.pass && v.reason.contains("does not fit"), "{v:?}");
    let v = adequate("How many telescopes did Halden Optics build?", "Aurora Telescope 2", &[HALDEN]);
    assert!(!v.pass && v.reason.contains("does not fit"), "a name with a number is no amount: {v:?}");
    let v = adequate(Q, "Aurora Observatory", &[HALDEN]);
    assert!(!v.pass && v.reason.contains("repeats the question"), "{v:?}");
    let sentence = ReaderAnswer { form: AnswerForm::Sentence, ..span(HALDEN.1, &[0], Vec::new()) };
    assert!(!run(Check::Adequacy, Q, &sentence, Some(&retrieval(&[HALDEN]))).pass);
    assert!(!adequate(Q, "# Halden Optics", &[HALDEN]).pass);
}

// The wrong answers below are the kinds a reader gives for a part of the question.

#[test]
fn the_entity_a_relative_clause_describes_is_not_the_answer() {
    let passages = [
        ("Gateway service", "The gateway keeps sessions in Harbor. Harbor is the shared session cache."),
        ("Harbor", "Harbor runs in the Oslo data centre."),
    ];
    let q = "Where does the cache that the gateway keeps sessions in run?";
    let v = adequate(q, "Harbor", &passages);
    assert!(!v.pass && v.reason.contains("cache"), "the intermediate hop: {v:?}");
    assert!(adequate(q, "Oslo", &passages).pass);
    let teams = [
        ("Ada Lind", "Ada Lind played for the Orwick Rovers, a football team from Selby."),
        ("Orwick Rovers", "The Orwick Rovers were coached by Nils Moe."),
    ];
    let coach = "Who coached the team that Ada Lind played for?";
    assert!(!adequate(coach, "Orwick Rovers", &teams).pass, "a team where a person was asked");
    assert!(adequate(coach, "Nils Moe", &teams).pass);
    // Asked for the very noun the clause describes, the described entity is the answer.
    let sculptor = [("Ada Lind", "Ada Lind is a sculptor who carved the harbour gate.")];
    assert!(adequate("Which sculptor who lived in Selby carved the harbour gate?", "Ada Lind", &sculptor).pass);
}

#[test]
fn the_asking_phrase_is_read_whatever_stands_before_its_noun() {
    let town = [("Kell", "Kell is a town in Selby. At the 2011 census it had 6,960 people.")];
    let q = "At the 2011 census, what was he population of the town where Ada Lind was born?";
    let v = adequate(q, "Kell", &town);
    assert!(!v.pass && v.reason.contains("population"), "a place for a number: {v:?}");
    assert!(adequate(q, "6,960", &town).pass);
    assert_eq!(asked_noun("What is the name of the river that runs through Kell?").as_deref(), Some("river"));
    assert_eq!(asked_noun("Who founded Kell?"), None);
}

#[test]
fn a_plural_asks_for_every_member_of_a_list() {
    let band = [("The Gulls", "The Gulls were Ada Lind, Tove Berg and Nils Moe.")];
    let q = "What musicians were members of The Gulls?";
    assert!(!adequate(q, "Ada Lind", &band).pass, "one of three");
    assert!(adequate(q, "Ada Lind, Tove Berg and Nils Moe", &band).pass);
    assert!(adequate("What series did Ada Lind direct?", "Low Tide", &[("Low Tide", "Low Tide is a series.")]).pass);
}

#[test]
fn a_unit_a_time_zone_or_an_adjective_is_no_place_or_thing() {
    let kell =
        [("Kell", "Kell is a Nordic harbour town. It observes Central European Time and lies 40 km from Selby.")];
    let v = adequate("Where is the harbour town of Kell?", "Central European Time", &kell);
    assert!(!v.pass && v.reason.contains("time zone"), "{v:?}");
    assert!(adequate("What time zone does Kell observe?", "Central European Time", &kell).pass);
    let v = adequate("Where is the harbour town of Kell?", "40 km", &kell);
    assert!(!v.pass, "{v:?}");
    let painter = [("Ada Lind", "Ada Lind is an Australian painter known for depictions of harbours.")];
    let v = adequate("The painter Ada Lind is known for depictions of what?", "Australian", &painter);
    assert!(!v.pass && v.reason.contains("adjective"), "{v:?}");
    assert!(adequate("What nationality is the painter Ada Lind?", "Australian", &painter).pass);
}

#[test]
fn the_number_in_a_name_is_no_amount() {
    let db = [
        ("Orion cluster", "It runs PostgreSQL 16 on three machines: one primary and two replicas."),
        ("Ledger", "Ledger runs as six replicas. In 2019 it moved; 16 engineers keep it."),
    ];
    let q = "How many replicas of the billing service run?";
    let v = run(Check::Adequacy, q, &span("16", &[0], Vec::new()), Some(&retrieval(&db[..1])));
    assert!(!v.pass && v.reason.contains("PostgreSQL 16"), "{v:?}");
    assert!(adequate(q, "six", &db).pass);
    let held = [("Ada Lind", "She was elected Mayor twice.")];
    assert!(adequate("How many times was Ada Lind elected?", "twice", &held).pass, "a count in words");
    let counted = [("Ledger", "Ledger has 16 engineers. Its version is Ledger 16.")];
    assert!(adequate(q, "16", &counted).pass, "written as a count once: an amount");
    let dated = retrieval(&[("Kell", "On May 16 the ships left. The old Route 66 ends here.")]);
    assert_eq!(named_by_number("16", &lines(&dated)), None, "a day of a month");
    assert_eq!(named_by_number("66", &lines(&dated)).as_deref(), Some("Route 66"));
}
