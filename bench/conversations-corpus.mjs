// The second corpus of the bench: long multi-session conversations between a user and an
// assistant, with facts about the user's life stated (and some of them changed) along the way,
// and questions whose answering turns are marked. Deterministic (mulberry32, one seed); written
// here, no external data; read by bench/conversations.mjs.
//
// A conversation (one agent) is 8–12 sessions of 20–60 turns, user and assistant taking turns,
// several hundred turns in all. Most turns are chit-chat and requests (recipes, emails,
// travel, money, tech…), many of them on the same topics as the facts (cars, pets, moving, work,
// doctors, books) without being about the user. 18–24 of the 28 fact types below are drawn for
// each user with their values (people, pets, cars, jobs, cities, hobbies, health, purchases…); a
// fact is stated by the user in one turn (alone, or in passing before a request), sometimes
// repeated by the assistant (an "echo") and mentioned again in a later session; about half of
// the facts that can change do, in a later session ("we sold the Yaris and got a Kia EV6").
//
// A turn *carries* a fact's version when that turn alone says it: it contains every key value
// of the version (checked), and every turn that contains them all is marked (checked). Each
// question lists its answering turns (every turn carrying the version it asks about) and, for a
// changed fact, the outdated turns (those carrying the earlier version).
//
// Question kinds (the kind is computed from the words, not chosen by the writer):
//   current     about the present value of a changed fact ("What car do we have now?"):
//               answered by the turns of the newest version; the older version's turns are
//               `outdated`
//   lexical     shares a rare word (porter stem in at most 2 % of the conversation's turns,
//               stop words aside) with an answering turn: a name, a brand, "allergic"…
//   paraphrase  shares no rare word with any answering turn (common words, e.g. "work", may
//               be shared)
// Every question was written either to name one value of the fact and ask another (written
// "lexical") or to ask in other words (written "paraphrase"); `intent` keeps that, `kind` is
// what the words make it. No question contains the value it asks for (checked).
//
// buildConversations({count, seed}) → {conversations: [{id, agent, user, sessions: [{id, turns:
// [{id, role, text, carries: [factId@version]}]}], facts: [{id, type, changed, versions: [{values,
// turns}]}], questions: [{id, kind, intent, q, fact, asks, answers, outdated}]}]}
// checkCorpus(corpus) → problems (strings); corpusStats(corpus) → counts.
import { mulberry32 } from "./lib.mjs";
import { tokens, rawTokens, STOPWORDS, stem } from "./fts.mjs";

// ── Value pools (fact values never appear in filler text; checkCorpus finds any that do) ─────────

const POOLS = {
  userNames: ["Alex", "Sam", "Jordan", "Robin", "Morgan", "Charlie", "Jamie", "Kit", "Casey", "Rowan", "Avery", "Quinn"],
  namesF: ["Lena", "Marta", "Priya", "Sofia", "Hannah", "Amara", "Ingrid", "Yuki", "Nadia", "Rosa", "Claire", "Freya", "Leila", "Maya",
    "Zoe", "Elena", "Ana", "Grace", "Tessa", "Ines", "Harriet", "Mireille", "Keiko", "Olga", "Beatriz", "Imogen"],
  namesM: ["Tomas", "Daniel", "Kofi", "Jonas", "Ravi", "Mateo", "Felix", "Oscar", "Hugo", "Samir", "Marcus", "Arjun", "Nico", "Omar",
    "Jakob", "Theo", "Luca", "Ethan", "Callum", "Dmitri", "Emeka", "Henrik", "Rafael", "Ivo", "Wendell", "Bastian"],
  homeCities: ["Leeds", "Rotterdam", "Glasgow", "Porto", "Denver", "Vancouver", "Dublin", "Valencia", "Gothenburg", "Bristol", "Montreal",
    "Edinburgh", "Krakow", "Auckland", "Lyon", "Melbourne", "Utrecht", "Seville", "Pittsburgh", "Wellington"],
  districts: ["Millbrook", "Northfield", "Ashgrove", "Kingsmere", "Eastbank", "Hollybush", "Larkhill", "Redcliffe", "Elmwood", "Stonebridge",
    "Westgate", "Brookside", "Fairview", "Cedar Hill", "Oakhurst", "Saltford", "Marigold Park", "Thornbury"],
  roles: ["nurse", "data analyst", "civil engineer", "graphic designer", "pharmacist", "sous-chef", "paralegal", "UX researcher",
    "physiotherapist", "accountant", "electrician", "architect", "lab technician", "copywriter", "software tester", "veterinary nurse",
    "translator", "project manager", "dental hygienist", "surveyor", "quality inspector", "payroll officer"],
  companies: ["Brightline Logistics", "Halcyon Health", "Northwind Studio", "Kestrel Analytics", "Bluepeak Energy", "Marlow & Finch",
    "Tidewater Insurance", "Orchard Software", "Copperleaf Architects", "Vantage Labs", "Ferngrove Clinic", "Saltmarsh Media",
    "Ironbridge Engineering", "Lumen Books", "Glasshouse Games", "Redwater Pharma", "Cobalt Freight", "Heronsgate Council"],
  partnerJobs: ["firefighter", "midwife", "sound engineer", "bus driver", "chef", "police officer", "junior doctor", "air traffic controller",
    "baker", "paramedic", "hotel manager", "security guard", "night editor", "care worker"],
  schools: ["Hillcrest Primary", "St Anne's", "Meadowbank School", "Larkfield Academy", "Riverside Montessori", "Oakwood Primary",
    "Greenway Junior School", "Beacon Hill Primary", "Fernside Infants", "Kingfisher Academy", "Willowbrook Primary", "Ashcombe School"],
  breeds: [["beagle", "dog"], ["border collie", "dog"], ["greyhound", "dog"], ["dachshund", "dog"], ["Labrador", "dog"], ["Maine Coon", "cat"],
    ["ginger tabby", "cat"], ["Siamese", "cat"], ["corgi", "dog"], ["whippet", "dog"], ["cockapoo", "dog"], ["Bengal", "cat"],
    ["springer spaniel", "dog"], ["French bulldog", "dog"], ["Ragdoll", "cat"], ["lurcher", "dog"]],
  petNames: ["Biscuit", "Pixel", "Mochi", "Pepper", "Juno", "Waffles", "Olive", "Bruno", "Ziggy", "Maple", "Noodle", "Pickle", "Luna",
    "Toast", "Clementine", "Otis", "Fudge", "Nacho", "Kiwi", "Bramble"],
  cars: ["Volvo V70", "Toyota Yaris", "Skoda Octavia", "Honda Jazz", "Ford Fiesta", "Mazda 3", "Subaru Outback", "Renault Clio",
    "Peugeot 208", "Volkswagen Golf", "Kia Picanto", "Fiat Panda", "Nissan Micra", "Hyundai i30", "Citroen Berlingo", "Dacia Duster",
    "Seat Leon", "Opel Corsa", "Suzuki Swift", "Toyota Corolla"],
  newCars: ["Tesla Model 3", "Nissan Leaf", "Kia EV6", "Hyundai Ioniq 5", "Polestar 2", "Renault Zoe", "VW ID.3", "MG4", "BYD Dolphin",
    "Skoda Enyaq", "Peugeot e-208", "Fiat 500e", "Volvo EX30", "Cupra Born"],
  colours: ["red", "silver", "dark blue", "white", "black", "green", "grey", "yellow", "burgundy", "beige", "orange", "teal"],
  towns: ["Whitby", "Tromso", "Ghent", "Sligo", "Kendal", "Annecy", "Galway", "Aarhus", "Lucca", "Cuenca", "Hobart", "Ballarat", "Kalmar",
    "Siena", "Tavira", "Bruges", "Penzance", "Oban", "Dunedin", "Trondheim"],
  months: ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"],
  allergens: ["cashews", "shellfish", "sesame", "penicillin", "peanuts", "kiwi fruit", "wasp stings", "latex", "mustard", "celery",
    "hazelnuts", "lupin"],
  meds: [["levothyroxine", "carbimazole", "an underactive thyroid"], ["a salbutamol inhaler", "a beclometasone inhaler", "asthma"],
    ["sumatriptan", "propranolol", "migraines"], ["amlodipine", "losartan", "high blood pressure"], ["omeprazole", "lansoprazole", "acid reflux"],
    ["ferrous sulfate", "ferrous fumarate", "anaemia"], ["metformin", "gliclazide", "type 2 diabetes"], ["sertraline", "citalopram", "anxiety"]],
  doctors: ["Okafor", "Lindqvist", "Moreau", "Haddad", "Castellano", "Nakamura", "Brennan", "Osei", "Petrakis", "Varga", "Ferreira", "Akhtar"],
  practices: ["Elm Street Surgery", "Parkside Medical Centre", "the Riverside Health Centre", "Canal Road Practice", "Beechwood Surgery",
    "the Harbour Medical Group", "Northgate Family Practice", "St Luke's Health Centre"],
  instruments: ["cello", "ukulele", "piano", "violin", "saxophone", "drums", "trumpet", "banjo", "clarinet", "bass guitar", "harp", "accordion"],
  days: ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
  activities: ["bouldering", "swimming", "spin classes", "Pilates", "kickboxing", "rowing", "aqua aerobics", "CrossFit", "badminton",
    "barre classes", "powerlifting", "hot yoga"],
  venues: ["The Foundry", "Crux Climbing Centre", "the Aquadome", "Studio Lumen", "Ironworks Gym", "Riverside Rowing Club", "Harbour Lido",
    "Kinetic Cycle Studio", "Southside Boxing Club", "the Beacon Leisure Centre", "Core & Co", "the Old Mill Gym"],
  diets: ["vegetarian", "vegan", "pescatarian", "dairy-free"],
  restaurants: [["Casa Lupita", "Mexican"], ["Little Saigon", "Vietnamese"], ["Trattoria Nonna Rita", "Neapolitan"], ["The Copper Wok", "Sichuan"],
    ["Bar Alegria", "Basque"], ["Yume Ramen", "Japanese"], ["Olive & Thyme", "Greek"], ["Mangal House", "Turkish"], ["Spice Route", "Keralan"],
    ["Le Petit Zinc", "French"], ["Seoul Kitchen", "Korean"], ["Habesha", "Ethiopian"], ["Tbilisi Nights", "Georgian"], ["Ceviche Corner", "Peruvian"]],
  teams: ["Celtic", "Arsenal", "Boca Juniors", "Ajax", "Benfica", "Borussia Dortmund", "Liverpool", "Atletico Madrid", "Napoli", "Feyenoord",
    "the Toronto Maple Leafs", "the Seattle Seahawks", "the Boston Red Sox", "the Chicago Bulls", "Hibernian", "Galatasaray"],
  books: [["Middlemarch", "George Eliot"], ["The Overstory", "Richard Powers"], ["Piranesi", "Susanna Clarke"], ["Project Hail Mary", "Andy Weir"],
    ["Anna Karenina", "Leo Tolstoy"], ["The Remains of the Day", "Kazuo Ishiguro"], ["Pachinko", "Min Jin Lee"], ["Dune", "Frank Herbert"],
    ["Beloved", "Toni Morrison"], ["The Name of the Rose", "Umberto Eco"], ["Circe", "Madeline Miller"], ["Wolf Hall", "Hilary Mantel"],
    ["Lonesome Dove", "Larry McMurtry"], ["The Left Hand of Darkness", "Ursula K. Le Guin"], ["Middlesex", "Jeffrey Eugenides"],
    ["Shogun", "James Clavell"]],
  phones: ["iPhone 8", "Galaxy S9", "Pixel 4a", "Moto G7", "iPhone SE", "OnePlus 6", "Xperia XZ2", "Nokia 7.2"],
  newPhones: ["iPhone 15", "Pixel 8", "Galaxy S24", "Fairphone 5", "OnePlus 12", "Nothing Phone 2", "Xperia 10 V", "Galaxy A55"],
  commutes: [["bike ride along the canal", "25"], ["tram ride", "35"], ["walk across the park", "20"], ["train journey", "50"],
    ["bus journey on the number 14", "40"], ["drive on the ring road", "30"], ["ferry crossing", "45"], ["scooter ride", "15"]],
  languages: ["Portuguese", "Japanese", "Italian", "Korean", "Dutch", "Greek", "Swahili", "Polish", "Turkish", "Welsh", "Norwegian", "Mandarin"],
  methods: ["Duolingo", "evening classes at the community college", "a tutor on Zoom", "a language exchange at the library", "Anki flashcards",
    "an online course from the Open University"],
  places: ["Sicily", "Iceland", "Crete", "the Dolomites", "Madeira", "Tasmania", "the Faroe Islands", "Sardinia", "Kyoto", "Patagonia",
    "the Scottish Highlands", "Montenegro", "Zanzibar", "the Azores", "Slovenia", "Oaxaca"],
  friendCities: ["Singapore", "Nairobi", "Buenos Aires", "Copenhagen", "Hanoi", "Reykjavik", "Marseille", "Calgary", "Adelaide", "Tallinn",
    "Bogota", "Osaka"],
  parentJobs: ["postman", "ship's engineer", "headteacher", "train driver", "dentist", "carpenter", "librarian", "bank manager",
    "stonemason", "lighthouse keeper", "watchmaker", "printer"],
  fears: ["heights", "deep water", "flying", "needles", "snakes", "thunderstorms", "crowds", "the dentist's chair", "wasps", "lifts"],
  times: ["8:30", "9 am", "9:15", "10 am", "11:30", "2 pm", "3:30", "4 pm"],
  plants: ["sweet peas", "dahlias", "lavender", "succulents", "runner beans", "sunflowers", "geraniums", "a dwarf fig tree", "chillies",
    "strawberries", "tulips", "a lemon tree"],
  purchases: [["coffee machine", ["Sage", "DeLonghi", "Gaggia", "Krups", "Jura"]], ["robot vacuum", ["Roomba", "Roborock", "Eufy", "Dreame"]],
    ["standing desk", ["Flexispot", "Fully", "Autonomous", "Uplift"]], ["air fryer", ["Ninja", "Cosori", "Tefal", "Philips"]],
    ["e-reader", ["Kindle", "Kobo", "PocketBook", "Boox"]], ["espresso grinder", ["Eureka", "Baratza", "Niche", "Fellow"]]],
};

// ── Fact types ───────────────────────────────────────────────────────────────────────────────────
//
// Each type: `keys` (the slots a turn must contain to carry the fact), `values(draw)` (all slots,
// keys and decoration), `state` (the user states it), `echo` (the assistant repeats it: carries),
// `react` (the assistant answers without repeating it), `again` (a later mention that carries
// it), `ask`: [intent, question, asked slot], and optionally `change`: {p, keys, values(draw,
// old), state, echo, react, again, ask (current questions)}. `{slot}` is a value, `{^slot}` the
// value capitalized, `{old.slot}` a value of the version before.

const T = [];
const fact = (type, def) => T.push({ type, ...def });

fact("home", {
  keys: ["district", "city"],
  values: (d) => ({ city: d.one("homeCities"), district: d.one("districts") }),
  state: [
    "We've been renting a flat in {district}, on the east side of {city}, for about three years now.",
    "Honestly, {district} is the best part of living in {city}: everything is walkable and the bakery opens at six.",
    "For context, home is {city}, the {district} end of town, about twenty minutes from the centre.",
    "Our street in {district} was closed all week for roadworks. That's {city} in the summer for you.",
  ],
  echo: ["{district} sounds lovely, and being that close to the middle of {city} must make life easy.",
    "Good to know you're in {district}, {city}. I'll keep that in mind when you ask for local ideas."],
  react: ["That sounds like a nice spot to live.", "It sounds like you've really settled in there.", "That's handy to know."],
  again: ["The farmers' market in {district} is back this weekend; it's the one thing I'd miss if I ever left {city}.",
    "There was a power cut across half of {city} last night, and {district} was dark for three hours."],
  ask: [["paraphrase", "Which city do I live in?", "city"], ["paraphrase", "What part of the world do I call home?", "city"],
    ["paraphrase", "Where is my flat, roughly?", "city"], ["lexical", "Which neighbourhood of {city} do I live in?", "district"]],
  change: {
    p: 0.5, keys: ["city"],
    values: (d) => ({ city: d.one("homeCities") }),
    state: ["Big news: I accepted the offer, so we're moving from {old.city} to {city} at the end of the month!",
      "The movers came on Tuesday and we slept in the new place in {city} for the first time. It still smells of paint.",
      "We finally left {old.city}. The new flat is in {city}, right by the river, and the light is incredible."],
    echo: ["Congratulations on the move to {city}! How are you finding it so far?"],
    react: ["What a big change! Moving is exhausting, so go easy on yourself this week.", "Exciting! Let me know if you need help with the boxes-and-admin side of things."],
    again: ["I still get lost on the trams here in {city}; the network makes no sense to me yet."],
    ask: ["Where do I live now?", "Which city did I end up in after the move?", "Where's home at the moment?"],
  },
});

fact("job", {
  keys: ["role", "company"],
  values: (d) => ({ role: d.one("roles"), company: d.one("companies") }),
  state: [
    "I've been a {role} at {company} for almost four years, and it still keeps me on my toes.",
    "Work was mad today. Being the only {role} on the team at {company} means everything lands on my desk.",
    "So, I'm a {role}. I work for a company called {company}, which nobody has ever heard of.",
    "My manager at {company} asked me to train the two new hires, on top of my usual {role} work.",
  ],
  echo: ["Being a {role} at {company} sounds demanding. No wonder you're tired by Friday."],
  react: ["That sounds like a lot on your plate.", "It sounds like they rely on you a lot.", "That's a lot of responsibility."],
  again: ["We had a fire drill at {company} in the middle of my busiest afternoon, which is not ideal when you're the {role} everyone is waiting on."],
  ask: [["paraphrase", "What's my job?", "role"], ["paraphrase", "What do I do for a living?", "role"], ["paraphrase", "Where do I work?", "company"],
    ["paraphrase", "Which firm employs me?", "company"], ["lexical", "What's my job title at {company}?", "role"]],
  change: {
    p: 0.5, keys: ["role", "company"],
    values: (d) => ({ role: d.one("roles"), company: d.one("companies") }),
    state: ["I handed in my notice! From next month I'm a {role} at {company}.",
      "First week at {company} done. Being a {role} there is a totally different pace from {old.company}.",
      "I got the job! {company} offered me the {role} position and I said yes on the spot."],
    echo: ["Congratulations on the {role} job at {company}! That's a big step."],
    react: ["That's fantastic news, well done!", "New jobs are a rollercoaster. I hope the people are nice."],
    again: ["The coffee at {company} is terrible, but the people I work with as a {role} are lovely."],
    ask: ["Where am I working these days?", "Who is my current employer?", "What's my job at the moment?"],
  },
});

fact("partner", {
  keys: ["name", "pjob"],
  values: (d) => { const rel = d.pick(["wife", "husband", "partner"]); return { rel, name: d.one(rel === "husband" ? "namesM" : rel === "wife" ? "namesF" : d.pick(["namesF", "namesM"])), pjob: d.one("partnerJobs") }; },
  state: [
    "My {rel} {name} works as a {pjob}, so our schedules rarely line up.",
    "{name}, my {rel}, is a {pjob} and has been on nights all week.",
    "I'm cooking tonight because {name} is wiped out. Being a {pjob} is brutal some weeks.",
    "{name} and I have been together eleven years. My {rel} has worked as a {pjob} for most of them."],
  echo: ["It must be tricky planning your week around {name}'s shifts as a {pjob}."],
  react: ["Shift work is hard on everyone in the house.", "It sounds like you two make a good team."],
  again: ["{name} finally got a weekend off from being a {pjob}, so we're doing absolutely nothing."],
  ask: [["paraphrase", "What's my {rel}'s name?", "name"], ["paraphrase", "What's my other half called?", "name"],
    ["paraphrase", "What does my spouse do for work?", "pjob"], ["lexical", "What does {name} do for a living?", "pjob"]],
});

fact("child", {
  keys: ["child", "school"],
  values: (d) => { const rel = d.pick(["son", "daughter"]); return { rel, child: d.one(rel === "son" ? "namesM" : "namesF"), school: d.one("schools") }; },
  state: [
    "My {rel} {child} started at {school} this week and came home absolutely buzzing.",
    "{child} has parents' evening at {school} on Thursday. The teachers always have a lot to say about my {rel}.",
    "We got a letter from {school} saying {child} is moving up a reading group. Proud parent moment.",
    "Parenting win: {child} walked into {school} this morning without a single tear. My {rel} is growing up so fast."],
  echo: ["{school} sounds like a great fit for {child}."],
  react: ["That's lovely to hear!", "It sounds like school is going well.", "You should be proud!"],
  again: ["{child} forgot the PE kit again, so I did the walk of shame back to {school} at lunchtime."],
  ask: [["paraphrase", "Which school does my {rel} go to?", "school"], ["paraphrase", "Where does my kid go to school?", "school"],
    ["paraphrase", "What's my {rel} called?", "child"], ["paraphrase", "What's the name of my little one?", "child"], ["lexical", "Which school is {child} at?", "school"]],
});

fact("pet", {
  keys: ["breed", "pet"],
  values: (d) => { const [breed, species] = d.one("breeds"); return { breed, species, pet: d.one("petNames") }; },
  state: [
    "We adopted a {breed} from the rescue centre on Saturday. We've named her {pet}.",
    "{pet}, our {breed}, has decided my slippers are her personal property.",
    "Meet the newest member of the household: a {breed} called {pet}!",
    "The {breed} we got, {pet}, has already chewed through two chair legs."],
  echo: ["A {breed} named {pet}, that's adorable.", "{pet} sounds like a very confident {breed}."],
  react: ["Congratulations on the new arrival!", "Pets really do run the house, don't they?", "What a lovely thing to come home to."],
  again: ["{pet} the {breed} rolled in something disgusting at the park, so tonight was bath night."],
  ask: [["paraphrase", "What's my {species} called?", "pet"], ["paraphrase", "What's our pet's name?", "pet"], ["paraphrase", "What kind of {species} do we have?", "breed"],
    ["paraphrase", "What kind of animal do we have at home?", "breed"], ["lexical", "What breed is {pet}?", "breed"]],
});

fact("car", {
  keys: ["colour", "car"],
  values: (d) => ({ colour: d.one("colours"), car: d.one("cars") }),
  state: [
    "Our {colour} {car} failed its inspection, so that's another bill this month.",
    "I drive a {colour} {car}. Nothing fancy, but it has never let me down.",
    "Someone dinged my {colour} {car} in the supermarket car park and just drove off.",
    "Filled up the {colour} {car} this morning and nearly cried at the price."],
  echo: ["A {colour} {car} is a sensible choice, and cheap to run too."],
  react: ["Cars always find a way to surprise you.", "Good to know what you drive, in case you ever want maintenance tips."],
  again: ["The {colour} {car} needs new tyres before the winter, apparently."],
  ask: [["paraphrase", "What car do I drive?", "car"], ["paraphrase", "What vehicle do I own?", "car"], ["paraphrase", "What am I driving around in?", "car"],
    ["lexical", "What colour is my {car}?", "colour"]],
  change: {
    p: 0.6, keys: ["car"],
    values: (d) => ({ car: d.one("newCars") }),
    state: ["We finally sold the old {old.car} and bought a {car}. No more petrol stations!",
      "Picked up the {car} today. The {old.car} went to a dealer for next to nothing.",
      "Goodbye {old.car}, hello {car}. It's electric, so I'm still learning where to charge it."],
    echo: ["Congratulations on the {car}! Electric driving takes a little getting used to."],
    react: ["Exciting! How does it drive?", "That's a big upgrade. Enjoy the quiet!"],
    again: ["The {car} did the whole trip to the coast on one charge, which I did not expect."],
    ask: ["What car do we have now?", "What's parked in our driveway these days?", "Which vehicle am I driving currently?"],
  },
});

fact("sibcar", {
  keys: ["sname", "scar"],
  values: (d) => { const srel = d.pick(["sister", "brother"]); return { srel, sname: d.one(srel === "sister" ? "namesF" : "namesM"), scar: d.one("cars") }; },
  state: [
    "My {srel} {sname} just bought a {scar} and won't stop sending me photos of it.",
    "{sname}, my little {srel}, finally passed the driving test and got a second-hand {scar}.",
    "My {srel} {sname} is coming up next weekend in the {scar}, the new pride and joy.",
  ],
  echo: ["{sname} must be thrilled with the {scar}!"],
  react: ["Ha, the new-car glow is real.", "Sounds like a fun new chapter for them."],
  again: ["{sname} has already scraped the {scar} against a bollard. My {srel} is gutted."],
  ask: [["paraphrase", "What does my {srel} drive?", "scar"], ["paraphrase", "What car did my {srel} buy?", "scar"], ["paraphrase", "Which vehicle did my sibling get?", "scar"],
    ["lexical", "What kind of car did {sname} get?", "scar"]],
  change: {
    p: 0.5, keys: ["sname", "scar"],
    values: (d) => ({ scar: d.one("newCars") }),
    state: ["{sname} traded in the {old.scar} for a {scar}. My {srel} changes cars like socks.",
      "Update on my {srel}: the {old.scar} is gone and {sname} now drives a {scar}."],
    echo: ["A {scar}! {sname} clearly doesn't do things by halves."],
    react: ["Ha, some people just love a new car.", "Well, that was quick!"],
    ask: ["What's my {srel} driving these days?", "Which car does my {srel} have now?"],
  },
});

fact("hometown", {
  keys: ["town"],
  values: (d) => ({ town: d.one("towns") }),
  state: ["I grew up in {town}, a small place where everyone knows everyone.",
    "Going back to {town} for the holidays always makes me feel about fifteen again.",
    "My childhood was spent in {town}. We left when I was eighteen and I've missed the sea ever since.",
    "Whenever someone mentions {town} I get homesick; that's where I spent the first eighteen years of my life."],
  echo: ["{town} sounds like a lovely place to have grown up."],
  react: ["There's something special about small places like that.", "Where we grow up stays with us."],
  ask: [["paraphrase", "Where did I grow up?", "town"], ["paraphrase", "Where was I raised?", "town"], ["paraphrase", "What town am I originally from?", "town"],
    ["paraphrase", "Where did I spend my early years?", "town"]],
});

fact("birthday", {
  keys: ["date"],
  values: (d) => ({ date: `${1 + Math.floor(d.r() * 28)} ${d.pick(POOLS.months)}`, age: String(28 + Math.floor(d.r() * 25)) }),
  state: ["It's my birthday on {date} and I still haven't decided what to do.",
    "I turn {age} on {date}. How did that happen?",
    "Can you believe I'll be {age} on {date}? All I want is a quiet dinner.",
    "{date} is the big day: I'm turning {age}, and I'm expecting cake."],
  echo: ["An early happy birthday for {date}!"],
  react: ["Age is just a number, as they say.", "Ooh, any ideas yet? I'm happy to brainstorm."],
  ask: [["paraphrase", "When was I born?", "date"], ["paraphrase", "What day do I get a year older?", "date"], ["lexical", "When's my birthday?", "date"]],
});

fact("allergy", {
  keys: ["allergen"],
  values: (d) => ({ allergen: d.one("allergens") }),
  state: ["I'm allergic to {allergen}, so I always have to ask what's in a dish.",
    "Bad night: something at the restaurant had {allergen} in it and I came out in hives.",
    "Just so you know, {allergen} is a hard no for me. I react badly to it."],
  echo: ["I'll remember to flag anything with {allergen} in it."],
  react: ["That must make eating out tricky.", "Thanks for telling me, that's important to know."],
  ask: [["paraphrase", "Do I have any allergies?", "allergen"], ["paraphrase", "Is there anything that makes me break out?", "allergen"],
    ["paraphrase", "What should I never eat or touch?", "allergen"], ["lexical", "What am I allergic to?", "allergen"]],
});

fact("medication", {
  keys: ["med", "condition"],
  values: (d) => { const [med, alt, condition] = d.one("meds"); return { med, alt, condition }; },
  state: ["The doctor put me on {med} for {condition}. Fingers crossed it helps.",
    "I take {med} every morning for {condition}, so I can't skip breakfast.",
    "Picked up another month of {med} from the pharmacy. The {condition} has been much calmer lately."],
  echo: ["Glad the {med} seems to be helping with the {condition}."],
  react: ["I hope it settles things down for you.", "Good that it's under control."],
  ask: [["paraphrase", "What medication do I take?", "med"], ["paraphrase", "What medicine am I on?", "med"], ["paraphrase", "Which prescription do I take daily?", "med"],
    ["lexical", "What do I take for {condition}?", "med"]],
  change: {
    p: 0.5, keys: ["med", "condition"],
    values: (d, old) => ({ med: old.alt, condition: old.condition }),
    state: ["My GP switched me from {old.med} to {med} for the {condition}; the old one made me dizzy.",
      "New prescription: I'm on {med} now for {condition}, instead of the {old.med}."],
    echo: ["I hope {med} treats you better for the {condition} than the last one did."],
    react: ["Side effects are miserable. Hopefully this one suits you.", "Good that your GP listened."],
    ask: ["What medication am I taking at the moment?", "Which pills am I on now?"],
  },
});

fact("doctor", {
  keys: ["dr", "practice"],
  values: (d) => ({ dr: d.one("doctors"), practice: d.one("practices") }),
  state: ["My GP is Dr {dr} at {practice}. Brilliant, but impossible to get an appointment with.",
    "Finally got a slot with Dr {dr} at {practice} next Tuesday.",
    "I've been registered with Dr {dr} over at {practice} for years."],
  echo: ["Dr {dr} at {practice} sounds like a keeper."],
  react: ["Good doctors are always in demand.", "It's reassuring to have a doctor you trust."],
  ask: [["paraphrase", "Who's my doctor?", "dr"], ["paraphrase", "Who's my family physician?", "dr"], ["paraphrase", "Which medic do I usually see when I'm ill?", "dr"],
    ["lexical", "Where does Dr {dr} practise?", "practice"]],
});

fact("instrument", {
  keys: ["instrument", "teacher"],
  values: (d) => ({ instrument: d.one("instruments"), teacher: d.one(d.pick(["namesF", "namesM"])), day: d.one("days") }),
  state: ["I've started {instrument} lessons with a teacher called {teacher}, every {day} after work.",
    "{teacher} says my {instrument} playing is 'coming along', which I think is a polite insult.",
    "Practised the {instrument} for an hour tonight. {teacher} set me a brutal piece for {day}."],
  echo: ["{teacher} sounds like a thorough {instrument} teacher."],
  react: ["Learning an instrument as an adult takes real dedication.", "Music practice pays off slowly, then all at once."],
  again: ["Missed my {instrument} lesson because of a late meeting, and {teacher} was very gracious about it."],
  ask: [["paraphrase", "What instrument am I learning?", "instrument"], ["paraphrase", "What have I been practising in the evenings?", "instrument"],
    ["paraphrase", "Who's my music teacher?", "teacher"], ["lexical", "Who teaches me {instrument}?", "teacher"]],
});

fact("exercise", {
  keys: ["activity", "venue"],
  values: (d) => ({ activity: d.one("activities"), venue: d.one("venues") }),
  state: ["I've started {activity} at {venue} twice a week. Everything hurts.",
    "Skipped {activity} at {venue} tonight because of the rain, and now I feel guilty.",
    "The {activity} sessions at {venue} are honestly the highlight of my week.",
    "Dragged myself to {activity} at {venue} at seven this morning and felt amazing afterwards."],
  echo: ["{^activity} at {venue} is a great way to stay fit."],
  react: ["It's great that you've found something active you enjoy.", "Consistency is what counts."],
  again: ["Pulled a muscle at {activity} at {venue}, so I'm hobbling around the office."],
  ask: [["paraphrase", "What sport do I do?", "activity"], ["paraphrase", "How do I keep fit?", "activity"], ["paraphrase", "What's my usual workout?", "activity"],
    ["lexical", "What do I do at {venue}?", "activity"]],
  change: {
    p: 0.5, keys: ["activity", "venue"],
    values: (d) => ({ activity: d.one("activities"), venue: d.one("venues") }),
    state: ["I quit {old.activity} and signed up for {activity} at {venue} instead.",
      "New routine: {activity} at {venue} three mornings a week. The old sessions just weren't for me any more."],
    echo: ["{^activity} at {venue} sounds like a fun change."],
    react: ["A change of routine can really help motivation.", "Good for you for finding something that suits you better."],
    ask: ["What do I do for exercise these days?", "What's my fitness routine now?", "How am I keeping in shape at the moment?"],
  },
});

fact("diet", {
  keys: ["diet"],
  values: (d) => ({ diet: d.one("diets") }),
  state: ["I went {diet} about two months ago and honestly don't miss much.",
    "Since I'm {diet} now, dinners out take a bit more planning.",
    "Eating {diet} has been easier than I expected, to be fair.",
    "We had friends over and I cooked a completely {diet} menu. Nobody even noticed."],
  echo: ["Going {diet} is a big change. Good for you for sticking with it."],
  react: ["That's impressive commitment.", "It does get easier once you have a few go-to meals."],
  ask: [["paraphrase", "Do I eat meat?", "diet"], ["paraphrase", "What are my eating habits like?", "diet"], ["paraphrase", "Is there anything I've cut out of my meals?", "diet"]],
  change: {
    p: 0.5, keys: ["diet"],
    values: (d) => ({ diet: d.one("diets") }),
    state: ["Confession: I've stopped being {old.diet}. I'm {diet} now, which feels more sustainable for me.",
      "I've given up on being {old.diet}. These days I'm {diet}."],
    echo: ["Being {diet} is still a big commitment. Do what works for you."],
    react: ["Food should work for you, not the other way round."],
    ask: ["What's my diet now?", "How do I eat these days?"],
  },
});

fact("restaurant", {
  keys: ["restaurant", "cuisine"],
  values: (d) => { const [restaurant, cuisine] = d.one("restaurants"); return { restaurant, cuisine }; },
  state: ["Our go-to for date night is {restaurant}, a little {cuisine} place around the corner.",
    "We ended up at {restaurant} again. Best {cuisine} food in town, I swear.",
    "If you ever hear me say 'the usual', I mean {restaurant}. Their {cuisine} dishes never miss."],
  echo: ["{restaurant} sounds wonderful. Good {cuisine} food is hard to beat."],
  react: ["Everyone needs a place like that.", "Sounds like a perfect evening."],
  ask: [["paraphrase", "What's our favourite restaurant?", "restaurant"], ["paraphrase", "Where do we like to eat out?", "restaurant"],
    ["paraphrase", "What's our favourite spot for dinner?", "restaurant"], ["lexical", "What kind of food does {restaurant} serve?", "cuisine"]],
});

fact("team", {
  keys: ["team"],
  values: (d) => ({ team: d.one("teams") }),
  state: ["I've supported {team} since I was six, through thick and very thin.",
    "{team} lost again at the weekend. Why do I do this to myself?",
    "Got tickets to see {team} next month! First live match in years."],
  echo: ["Fingers crossed {team} turn things around."],
  react: ["Loyalty like that is rare.", "Being a fan is a rollercoaster."],
  ask: [["paraphrase", "Which team do I support?", "team"], ["paraphrase", "Who do I cheer for?", "team"], ["paraphrase", "Which side am I a fan of?", "team"]],
});

fact("book", {
  keys: ["title", "author"],
  values: (d) => { const [title, author] = d.one("books"); return { title, author }; },
  state: ["I'm halfway through {title} by {author} for book club, and it's slow going.",
    "Started reading {title} last night. {author} really knows how to open a novel.",
    "Book club picked {title}, so that's my bedtime reading sorted. Never read any {author} before."],
  echo: ["{title} is a great pick. {author} rewards patience."],
  react: ["Some books take a while to get going.", "Ooh, let me know what you think of it."],
  ask: [["paraphrase", "What book am I reading?", "title"], ["paraphrase", "What novel am I reading?", "title"], ["paraphrase", "What's on my nightstand to read?", "title"],
    ["lexical", "Which {author} novel am I reading?", "title"]],
  change: {
    p: 0.5, keys: ["title", "author"],
    values: (d) => { const [title, author] = d.one("books"); return { title, author }; },
    state: ["Finished {old.title} at last. Next up for book club is {title} by {author}.",
      "I gave up on {old.title} and started {title} by {author} instead. I'm hooked."],
    echo: ["{title} by {author} is a great choice. Enjoy!"],
    react: ["A fresh book is always exciting.", "Enjoy the new one!"],
    ask: ["What book am I reading at the moment?", "Which novel is my current read?"],
  },
});

fact("phone", {
  keys: ["phone"],
  values: (d) => ({ phone: d.one("phones") }),
  state: ["My phone is an ancient {phone} and the battery dies by lunchtime.",
    "The screen on my {phone} cracked again. I should really upgrade.",
    "Still hanging on to my {phone}; it does everything I need."],
  echo: ["The {phone} has had a good run, to be fair."],
  react: ["Phones are so expensive to replace these days.", "If it works, it works!"],
  ask: [["paraphrase", "What phone do I have?", "phone"], ["paraphrase", "What mobile do I have?", "phone"], ["paraphrase", "What handset do I use?", "phone"]],
  change: {
    p: 0.5, keys: ["phone"],
    values: (d) => ({ phone: d.one("newPhones") }),
    state: ["I finally caved and got a {phone}. Goodbye, {old.phone}.", "New phone day! Switched from the {old.phone} to a {phone}."],
    echo: ["Enjoy the {phone}! The battery alone will feel like a miracle."],
    react: ["Exciting! Did your contacts all transfer okay?"],
    ask: ["What phone am I using now?", "Which mobile did I end up getting?"],
  },
});

fact("commute", {
  keys: ["commute"],
  values: (d) => { const [commute, minutes] = d.one("commutes"); return { commute, minutes }; },
  state: ["My commute is a {minutes}-minute {commute}, which I actually enjoy.",
    "The {commute} to work took twice as long today because of roadworks.",
    "I actually look forward to my {commute} in the mornings; it's about {minutes} minutes of peace."],
  echo: ["A {minutes}-minute {commute} isn't bad at all."],
  react: ["A commute can make or break a job, honestly.", "Good to know how you get around."],
  ask: [["paraphrase", "How do I get to work?", "commute"], ["paraphrase", "How do I get to the office?", "commute"], ["paraphrase", "What's my journey in each morning like?", "commute"]],
});

fact("language", {
  keys: ["language", "method"],
  values: (d) => ({ language: d.one("languages"), method: d.one("methods") }),
  state: ["I'm trying to learn {language}, mostly through {method}.",
    "Forty minutes of {language} verbs before coffee this morning; I'm sticking with {method} for now.",
    "My {language} is slowly improving thanks to {method}."],
  echo: ["{^method} is a solid way to pick up {language}."],
  react: ["Languages take patience, but it adds up.", "Slow and steady is how languages stick."],
  ask: [["paraphrase", "What language am I learning?", "language"], ["paraphrase", "Which foreign tongue am I studying?", "language"],
    ["paraphrase", "What am I trying to become fluent in?", "language"], ["lexical", "How am I studying {language}?", "method"]],
});

fact("trip", {
  keys: ["place", "month"],
  values: (d) => ({ place: d.one("places"), month: d.one("months") }),
  state: ["We've booked {place} for {month}. Our first proper holiday in three years.",
    "Counting down to {place} in {month}! I've already started a packing list.",
    "We're off to {place} in {month}, so I need to renew my passport."],
  echo: ["{place} in {month} should be gorgeous."],
  react: ["You've earned it.", "That sounds like a wonderful trip."],
  ask: [["paraphrase", "Where are we going on holiday?", "place"], ["paraphrase", "What's our vacation destination?", "place"], ["paraphrase", "Where's our next trip?", "place"],
    ["lexical", "When are we going to {place}?", "month"]],
  change: {
    p: 0.5, keys: ["place", "month"],
    values: (d) => ({ place: d.one("places"), month: d.one("months") }),
    state: ["Change of plans: {old.place} is off because the flights doubled in price. We're doing {place} in {month} instead.",
      "We cancelled {old.place} and rebooked for {place} in {month}."],
    echo: ["{place} in {month} sounds like a great alternative."],
    react: ["Annoying, but the new plan sounds just as good.", "Flexible travellers have the best trips."],
    ask: ["Where are we travelling this year?", "What's our holiday destination now?"],
  },
});

fact("friend", {
  keys: ["friend", "fcity"],
  values: (d) => ({ friend: d.one(d.pick(["namesF", "namesM"])), fcity: d.one("friendCities") }),
  state: ["My best friend {friend} lives in {fcity} now, so we mostly talk on video calls.",
    "{friend}, my oldest friend, moved to {fcity} for work last year.",
    "Flying out to see {friend} in {fcity} next month; we haven't been in the same room since the wedding."],
  echo: ["{friend} being in {fcity} is the perfect excuse for a trip."],
  react: ["Long-distance friendships take effort, but they're worth it.", "That'll be a lovely reunion."],
  ask: [["paraphrase", "Where does my best friend live?", "fcity"], ["paraphrase", "Where does my closest mate live?", "fcity"],
    ["paraphrase", "Which country would I fly to to see my bestie?", "fcity"], ["lexical", "Which city is {friend} based in?", "fcity"]],
});

fact("parent", {
  keys: ["pjob"],
  values: (d) => ({ parent: d.pick(["mum", "dad"]), pjob: d.one("parentJobs") }),
  state: ["My {parent} retired last spring after thirty years as a {pjob}.",
    "My {parent} spent a whole career as a {pjob} and now can't sit still.",
    "My {parent} was a {pjob} for decades and still talks about it at every family dinner."],
  echo: ["Thirty years as a {pjob}! Your {parent} has earned the rest."],
  react: ["Retirement is an adjustment for a lot of people.", "Ha, some people just aren't built for sitting still."],
  ask: [["paraphrase", "What did my {parent} do for work?", "pjob"], ["paraphrase", "What was my {parent}'s line of work?", "pjob"], ["paraphrase", "What did my {parent} do before stopping work?", "pjob"]],
});

fact("fear", {
  keys: ["fear"],
  values: (d) => ({ fear: d.one("fears") }),
  state: ["I'm absolutely terrified of {fear}, always have been.", "Don't laugh, but I can't handle {fear}. Never could.",
    "The one thing I avoid at all costs is {fear}."],
  echo: ["Lots of people struggle with {fear}; you're not alone."],
  react: ["Everyone has something that gets to them.", "That's completely understandable."],
  ask: [["paraphrase", "What am I afraid of?", "fear"], ["paraphrase", "What am I scared of?", "fear"], ["paraphrase", "What's my biggest phobia?", "fear"]],
});

fact("meeting", {
  keys: ["day", "time"],
  values: (d) => ({ day: d.pick(POOLS.days.slice(0, 5)), time: d.one("times") }),
  state: ["I've got a standing team meeting every {day} at {time}, so don't let me book anything then.",
    "The {day} {time} team call overran by forty minutes again.",
    "Every {day} at {time} I'm stuck in the team meeting, so I'll reply to people after that."],
  echo: ["I'll keep your {day} {time} slot clear for the team meeting."],
  react: ["Good to know, I'll keep that in mind.", "Noted!"],
  ask: [["paraphrase", "When's my weekly team meeting?", "day"], ["paraphrase", "When is my weekly catch-up with colleagues?", "day"], ["lexical", "What time is my {day} team meeting?", "time"]],
});

fact("garden", {
  keys: ["plant"],
  values: (d) => ({ plant: d.one("plants") }),
  state: ["The balcony is basically a jungle of {plant} at this point.", "My {plant} finally survived a whole winter on the balcony.",
    "I spent Sunday repotting the {plant} on the balcony."],
  echo: ["A balcony full of {plant} sounds lovely."],
  react: ["That's a real achievement.", "Green fingers!"],
  ask: [["paraphrase", "What's growing on my balcony?", "plant"], ["paraphrase", "What am I growing at home?", "plant"], ["paraphrase", "What's in the pots outside my window?", "plant"]],
});

fact("purchase", {
  keys: ["item", "brand"],
  values: (d) => { const [item, brands] = d.one("purchases"); return { item, brand: d.pick(brands), brands }; },
  state: ["I splurged on a {brand} {item} this weekend.", "The {brand} {item} arrived today and it's already the best thing in the flat.",
    "I finally bought the {brand} {item} I'd been eyeing for months."],
  echo: ["A {brand} {item}? Good choice."],
  react: ["Treat yourself!", "Ooh, nice."],
  ask: [["paraphrase", "What did I buy recently?", "brand"], ["paraphrase", "What did I treat myself to recently?", "brand"], ["lexical", "Which brand of {item} did I buy?", "brand"]],
  change: {
    p: 0.5, keys: ["item", "brand"],
    values: (d, old) => ({ item: old.item, brand: d.pick(old.brands.filter((b) => b !== old.brand)) }),
    state: ["The {old.brand} {item} broke after a week, so I returned it and got a {brand} {item} instead.",
      "Swapped the {old.brand} for a {brand} {item}; the first one was far too loud."],
    echo: ["Hopefully the {brand} {item} is a keeper."],
    react: ["Good thing you could return it."],
    ask: ["Which {item} did I end up keeping?", "What {item} do I own now?"],
  },
});

// ── Filler: requests and chit-chat ───────────────────────────────────────────────────────────────
// Each topic: [user variants, the assistant's answer to each (same order), follow-ups [user,
// assistant, the answer it fits (absent: any)]].

const FILLER = [
  [["Can you help me write a polite email to my landlord asking them to fix the boiler? It's been broken for a week.",
    "I need to nudge my landlord about the boiler again. Could you draft something firm but friendly?"],
   ["Of course. Here's a draft: \"Hi, I'm writing to follow up on the boiler, which has not worked for a week now. Could you let me know when an engineer can come round? I'm happy to be flexible on timing. Thanks in advance.\" You could add the date you first reported it, so there's a clear record.",
    "Sure. Something like: \"Hello, just a reminder that the boiler is still broken and we've been without hot water for several days. Please could you arrange a repair this week? Let me know which times suit the engineer.\" Keep a copy of every message in case you need it later."],
   [["That's perfect, sending it now.", "Good luck! Fingers crossed they sort it quickly."]]],
  [["What can I make for dinner with chickpeas, spinach and some leftover rice?", "I've got a tin of chickpeas, a bag of spinach and cold rice. Any dinner ideas?"],
   ["A quick chickpea and spinach curry works well: fry an onion with garlic, ginger and curry powder, add the chickpeas and a tin of tomatoes, simmer ten minutes, then wilt the spinach in at the end. Serve it over the reheated rice, making sure the rice is piping hot all the way through.",
    "You could do a fried rice: crisp the chickpeas in a hot pan with oil and cumin, add the cold rice, stir in the spinach until it wilts, and finish with a fried egg and some soy sauce. It takes about fifteen minutes."],
   [["Ooh, the curry sounds good. Can I use frozen spinach?", "Yes, just defrost and squeeze out the water first so the sauce doesn't go watery.", 0]]],
  [["Give me some ideas for a rainy weekend that don't involve spending loads of money.", "It's going to pour all weekend. What can we do that's cheap?"],
   ["A few ideas: a museum with free entry, a baking project, a board game marathon, a film double bill with homemade popcorn, or a long walk anyway with proper waterproofs followed by hot chocolate. Libraries often have free events at weekends too.",
    "Rainy weekends are great for projects: sort out old photos, try a new recipe, build a blanket fort if there are kids around, or pick a long film series and commit. Check your local library's listings as well; many run free talks."],
   []],
  [["My laptop fan has been really loud lately. Is that something to worry about?", "Why would a laptop suddenly start sounding like a jet engine?"],
   ["Usually it means the laptop is working hard or running hot. Check the task manager for a program using lots of processor time, make sure the vents aren't blocked, and consider cleaning out dust with compressed air. If it's loud even when idle, the fan may be wearing out.",
    "Most often it's dust in the vents or a background process hogging the processor. Try using it on a hard surface rather than a bed or sofa, close heavy browser tabs, and check for updates. If nothing helps, a repair shop can clean or replace the fan cheaply."],
   [["It's always on the sofa, so that's probably it.", "That's a very common cause. A cheap laptop stand or even a tray can make a big difference.", 1]]],
  [["What's the difference between affect and effect? I always mix them up.", "Quick grammar question: affect or effect?"],
   ["In most cases, \"affect\" is the verb and \"effect\" is the noun: the weather affects my mood; the weather has an effect on my mood. A handy trick is that A is for action and E is for end result.",
    "\"Affect\" is usually a verb meaning to influence something, and \"effect\" is usually a noun meaning the result. There are rare exceptions, like \"to effect change\", but the rule of thumb covers almost everything."],
   [["A for action, I like that.", "It sticks, doesn't it? Once you have it, you'll spot the mistake everywhere.", 0]]],
  [["How much should I keep in an emergency fund?", "Is three months of expenses really enough for a rainy-day fund?"],
   ["A common guideline is three to six months of essential expenses, such as rent, bills, food and transport. If your income is irregular or you have dependants, aiming for the higher end makes sense. Keep it somewhere easy to access, like a separate savings account.",
    "Three months is a reasonable start, and six gives more breathing room. The right amount depends on how stable your income is and how quickly you could cut costs in an emergency. Build it gradually with an automatic transfer on payday."],
   []],
  [["Is it bad to drink coffee after four in the afternoon?", "I had an espresso at five and now I can't sleep. Was that the reason?"],
   ["It can be. Caffeine has a half-life of around five to six hours, so half of an afternoon coffee can still be in your system at bedtime. Many people find a cut-off around early afternoon helps their sleep, though sensitivity varies a lot.",
    "Very likely. Caffeine lingers for hours, and some people are much more sensitive to it than others. Try a decaf or herbal tea in the afternoon for a week and see whether your sleep improves."],
   [["Ugh, but the afternoon coffee is the best one.", "I know! A good decaf can keep the ritual without the sleepless night."]]],
  [["Can you recommend a podcast about history? Something with good storytelling.", "I need a new podcast for long walks. I like history."],
   ["You might enjoy narrative history shows that take one story across several episodes, such as series on the fall of Rome or on famous expeditions. Look for ones with a single host telling a story rather than a panel chat; they tend to be more immersive.",
    "Try a long-form narrative series: the best ones take a single event, like a revolution or a shipwreck, and tell it over several episodes. If you prefer shorter episodes, there are lots of weekly shows that cover one odd historical story each time."],
   []],
  [["I'm so tired this week. Any tips for sleeping better?", "I keep waking up at three in the morning. What can I do?"],
   ["A few things help most people: a consistent wake-up time, even at weekends; daylight in the morning; no screens for the last half hour before bed; and a cool, dark bedroom. If you wake in the night, try not to check the time, as that tends to wake you up more.",
    "Waking in the early hours is really common, especially with stress. Keep the room cool and dark, avoid alcohol late in the evening, and if you're awake for more than twenty minutes, get up and do something dull in dim light until you feel sleepy again."],
   [["No screens before bed is going to be hard.", "Start with fifteen minutes and build up. A paper book or a podcast helps fill the gap.", 0]]],
  [["The leaves on my houseplant are going yellow. What am I doing wrong?", "Why does a houseplant get yellow leaves?"],
   ["The most common cause is overwatering: soggy soil suffocates the roots. Let the top few centimetres of soil dry out before watering again, and make sure the pot has drainage holes. Too little light or a sudden draught can also cause it.",
    "Usually it's too much water, not too little. Check that the pot drains well and water only when the top of the soil is dry. If the yellowing is only on the oldest leaves, it may just be natural ageing."],
   []],
  [["It's a colleague's leaving do on Friday. What's a good gift under twenty pounds?", "What do you get a coworker who's leaving? Budget is small."],
   ["Something personal but practical works well: a nice notebook and pen, a plant, good coffee or tea, or a book related to a hobby of theirs. A card with messages from the whole team often means the most.",
    "A group card plus a small treat is a classic: quality chocolate, a candle, or a voucher for a café near their new office. If they're moving cities, a guidebook for their new home is a thoughtful touch."],
   [["The guidebook idea is great.", "It shows you paid attention, which is what people remember.", 1]]],
  [["How do I negotiate a salary without sounding greedy?", "I've got a performance review coming up. How do I ask for a raise?"],
   ["Go in with evidence: what you've delivered, extra responsibilities you've taken on, and what similar roles pay. Name a specific figure rather than a vague request, and keep the tone collaborative: you're discussing your value, not making demands.",
    "Prepare a short list of achievements with numbers if you can, research typical pay for your role, and ask directly. Something like: \"Based on what I've taken on this year, I'd like to discuss moving my salary to X.\" Then stop talking and let them respond."],
   [["Stopping talking is the hard part for me.", "It's hard for everyone! Silence feels awkward, but it gives them space to answer properly.", 1]]],
  [["Are electric cars actually cheaper to run than petrol ones?", "Does an electric car really save money over a few years?"],
   ["Usually, yes, if you can charge at home on a cheaper night tariff: the cost per mile is often a third or less of petrol. Servicing tends to be cheaper too. The higher purchase price and public charging costs can eat into the savings, so it depends on how you'd use it.",
    "Running costs are typically much lower, especially with home charging. The big variables are the purchase price, insurance, and how often you'd rely on expensive rapid chargers. For lots of short trips, the maths usually works out well."],
   []],
  [["What should the tyre pressure be on a normal family car?", "How often should I check the tyre pressure?"],
   ["It varies by model, so check the sticker inside the driver's door or the fuel flap, or the handbook. Check once a month and before long trips, ideally when the tyres are cold. Underinflated tyres wear faster and use more fuel.",
    "Once a month is a good habit, plus before any long drive. The right pressure is on a label inside the door frame or fuel cap; there are often two figures, one for normal loads and one for a full car."],
   []],
  [["A friend's puppy keeps biting everyone's hands. Any advice I can pass on?", "How do you stop a puppy from nipping?"],
   ["Puppies explore with their mouths, so it's normal but needs redirecting. When it nips, stop playing and offer a chew toy instead; praise it when it chews the toy. Plenty of sleep matters too: overtired puppies bite more.",
    "Redirect and be consistent: swap hands for a toy every time, and pause play briefly if the nipping gets too rough. Short training sessions and enough naps make a big difference. Most puppies grow out of it with patience."],
   []],
  [["How do I stop a cat from scratching the sofa?", "The neighbours' cat keeps sneaking in and scratching our sofa. Ideas?"],
   ["Give it a better option: a tall, sturdy scratching post near the sofa, ideally covered in sisal. Make the sofa less appealing with a throw or double-sided tape for a while. Reward the cat when it uses the post.",
    "For a visitor, the easiest fix is keeping windows and cat flaps closed when you're out. Citrus scents and double-sided tape on the sofa arms also put most cats off."],
   []],
  [["What should be on a checklist when you're moving house?", "A friend is moving next month and asked me for a moving checklist. Help?"],
   ["Key items: book the removal van early, redirect post, tell your bank, employer and doctor about the new address, take meter readings on both ends, set up internet in advance, and pack an essentials box with the kettle, chargers, toilet roll and bedding.",
    "Start with the admin: change of address for banks, insurance and subscriptions, and meter readings on moving day. Then logistics: van or removal company, boxes labelled by room, and a first-night bag. Internet takes a while to set up, so order it early."],
   [["The first-night bag is genius.", "It saves so much rummaging at eleven at night when all you want is a toothbrush.", 1]]],
  [["Can a landlord keep my whole deposit for a few marks on the wall?", "How do deposit disputes work when you move out?"],
   ["Generally, a landlord can only deduct for damage beyond normal wear and tear, and must justify the amount. Photos from when you moved in are your best evidence. If you disagree, most deposit protection schemes offer a free dispute service.",
    "Check whether the deposit is protected in a scheme; if it is, you can raise a free dispute. Deductions should reflect actual damage, not fair wear and tear. Your check-in inventory and photos carry a lot of weight."],
   []],
  [["My train was delayed by two hours. Am I owed anything?", "Can you claim compensation for a delayed flight?"],
   ["Often, yes. Many rail operators offer compensation for delays over fifteen or thirty minutes, and for long flight delays airlines may owe you a fixed sum, depending on the distance and the cause. Keep your tickets and claim through the operator's website.",
    "It depends on the rules that apply, but delays of that length usually qualify. Airlines can refuse for extraordinary circumstances like severe weather. Claims are free to make directly, so avoid companies that take a cut."],
   []],
  [["What should I pack for a week at the beach?", "Help me make a packing list for a beach holiday."],
   ["Essentials: swimwear, sun cream, a hat, sunglasses, a light cover-up, sandals, a reusable water bottle, a good book, and a small first-aid kit with plasters and antihistamines. Add a power bank and a dry bag for your phone if you'll be near the water a lot.",
    "Think layers for the evening, plenty of sun protection, a beach towel if the accommodation doesn't provide one, and snorkelling gear if you enjoy it. Roll clothes rather than folding to save space."],
   [["I always forget sun cream.", "Pack it first, then! Or put it on your phone's reminder list for the morning you leave."]]],
  [["What's the fastest way to learn a new language as an adult?", "How many hours a day do you need to really learn a language?"],
   ["Consistency beats intensity: twenty to thirty minutes every day works better than a long session once a week. Mix listening, speaking and spaced-repetition vocabulary, and find a conversation partner as early as you can, even if it feels awkward.",
    "There's no magic number, but daily contact is what matters. Speaking early, even badly, speeds things up enormously. Pair that with listening to things you enjoy and reviewing vocabulary regularly."],
   []],
  [["Recommend me a book for a long flight. Something gripping but not too heavy.", "I need a page-turner for the holidays. Any suggestions?"],
   ["A good thriller or a well-paced mystery is ideal for a flight; look for something with short chapters, which keeps you turning pages. If you like science fiction, a fast survival story can be brilliant. Tell me a book you loved recently and I'll narrow it down.",
    "Classic crime novels are perfect for travelling: self-contained, clever, and easy to pick up after a nap. Or try a popular adventure novel with a strong narrator. What did you enjoy last time?"],
   []],
  [["My phone battery drains really fast. Anything I can do?", "How do I make my phone battery last longer?"],
   ["Check the battery settings to see which apps use the most power, lower the screen brightness, and turn off background refresh for apps you don't need. If the phone is a few years old, a battery replacement is often cheap and makes it feel new.",
    "Dim the screen, switch off location for apps that don't need it, and enable low-power mode when you're out. If the battery health reading is below about eighty percent, a replacement is worth considering."],
   []],
  [["How do I explain my symptoms properly to a doctor? I always forget things in the appointment.", "Any tips for getting the most out of a short GP appointment?"],
   ["Write a short list before you go: what the symptom is, when it started, what makes it better or worse, and what you've already tried. Bring any medicines you take. Lead with your main concern so it doesn't get squeezed in at the end.",
    "Prepare: note the main problem, timeline and any questions, and mention the most important thing first. It's fine to read from your notes. Ask the doctor to repeat anything you didn't catch."],
   []],
  [["Hay fever is destroying me this week. Any tricks beyond tablets?", "How do you survive hay fever season?"],
   ["A few things help: shower and change clothes when you get home, keep windows closed in the early morning and evening when pollen counts peak, wear wraparound sunglasses, and dab a little balm around your nostrils to trap pollen. A pharmacist can suggest a nasal spray too.",
    "Check the pollen forecast, dry laundry indoors on bad days, and wash your hair before bed so you don't bring pollen onto the pillow. A steroid nasal spray started a couple of weeks before the season can help a lot."],
   []],
  [["I want to run my first 5k. How should I train?", "What's a good plan for a complete beginner who wants to start running?"],
   ["A run-walk plan is the classic approach: start with one minute running and ninety seconds walking, repeated for twenty minutes, three times a week, and gradually increase the running intervals over about nine weeks. Go slowly enough that you can talk.",
    "Start gently with intervals of running and walking, three times a week, with rest days in between. Good shoes matter more than anything else. Most beginners can run 5k within two months."],
   [["Slow enough to talk, got it.", "It feels too easy at first, but that's exactly how you avoid injury.", 0]]],
  [["My lower back aches after sitting all day. Any stretches?", "What stretches help with a stiff back from desk work?"],
   ["Try a gentle cat-cow on all fours, a knee-to-chest stretch lying down, and a seated twist, holding each for around thirty seconds. More importantly, get up and move every half hour or so. If pain spreads down your leg or lasts for weeks, see a physiotherapist.",
    "Movement breaks help most: stand up every thirty to forty minutes. Stretches like child's pose, hip flexor lunges and gentle twists can ease stiffness. Check your chair height and screen position too."],
   []],
  [["Can you help me plan five lunches I can prep on Sunday?", "I want to batch-cook my work lunches. Ideas that last five days?"],
   ["Here's a simple plan: a big tray of roasted vegetables with couscous, a pot of lentil soup, chicken or tofu with rice and greens, a pasta salad with pesto, and a bean chili. Soups and stews keep best; add fresh herbs or a squeeze of lemon on the day.",
    "Pick two bases and mix them: a grain salad and a stew, for example. Keep dressings separate so nothing goes soggy, and freeze anything you won't eat within three days."],
   []],
  [["How do I start a sourdough starter from scratch?", "My sourdough starter smells like nail polish. Is it dead?"],
   ["Mix equal weights of flour and water in a jar, leave it loosely covered at room temperature, and each day discard half and feed it again. It usually gets bubbly and reliably rises within one to two weeks.",
    "Not dead, just hungry! A smell like nail polish means the yeast has run out of food. Discard most of it and feed it more often for a few days; it should bounce back."],
   []],
  [["Is there a good way to track spending without a complicated app?", "I want to budget better. Spreadsheet or app?"],
   ["A simple spreadsheet works well: one column for the date, one for the amount, one for the category. Review it once a week. The best system is the one you'll actually keep using, so start simple.",
    "Either works. Apps save time by pulling in transactions automatically, while a spreadsheet makes you more aware of each purchase. Try one for a month and see which you stick with."],
   []],
  [["Can you look over the opening of my cover letter? I feel like it's boring.", "How do I make a cover letter stand out?"],
   ["Happy to. A strong opening names the role and gives one concrete reason you're a great fit, ideally an achievement with a number in it. Skip phrases like \"I am writing to apply\"; go straight to the point.",
    "Lead with the most relevant thing you've done, tie it to what the company needs, and keep it under a page. Tailor the first paragraph for each application; recruiters can tell when it's generic."],
   []],
  [["What's a good structure for a short weekly meeting agenda?", "Our team meetings go on forever. How do I keep them short?"],
   ["Try: a two-minute round of updates, the one or two decisions that need making, blockers, and actions with owners. Put the time next to each item and send it the day before. End early if you're done.",
    "Share an agenda in advance, start on time, and move long discussions to a separate follow-up. A visible timer sounds silly but works surprisingly well."],
   []],
  [["How do I say no to extra work without looking lazy?", "My manager keeps piling things on. How do I push back politely?"],
   ["Frame it around priorities: \"I'm happy to take this on. Which of my current tasks should I pause to make room?\" That shows willingness while making the trade-off visible.",
    "Be specific about your current load and ask for help prioritising. Offering an alternative, like a later deadline or a smaller scope, keeps it collaborative."],
   []],
  [["How much screen time is reasonable for a primary-school kid?", "We're arguing at home about screen time for the kids. What's sensible?"],
   ["There's no single right number, but many families aim for clear routines: no screens at meals or in the hour before bed, and a balance with outdoor play and reading. What they watch matters as much as how long.",
    "Agree rules together and write them down: when, where and what. Co-watching and talking about what they see helps. Consistency is more important than the exact number of minutes."],
   []],
  [["Can you explain fractions in a way a seven-year-old would get?", "Helping with maths homework: how do I explain halves and quarters?"],
   ["Use food! Cut a pizza or a sandwich into equal pieces: two equal pieces are halves, four are quarters. The bottom number says how many equal pieces there are, and the top number says how many you have.",
    "Fold a piece of paper in half and then in half again, and colour in the parts. Seeing that two quarters cover the same space as one half usually makes it click."],
   [["Pizza it is.", "Maths with snacks is always more popular.", 0]]],
  [["Any ideas for packed lunches that aren't just sandwiches?", "I'm bored of making the same school lunches every day."],
   ["Try wraps, pasta salad, cold pizza, a little bento box with crackers, cheese cubes, cucumber and grapes, or homemade muffins. Leftovers in a small thermos flask work brilliantly in winter.",
    "Rotate a few themes: a picnic box on Monday, pasta on Tuesday, a wrap on Wednesday, and so on. Getting the kids to choose between two options gives them a sense of control too."],
   []],
  [["Can you explain the offside rule in football? I still don't get it.", "What does offside actually mean?"],
   ["A player is offside if, when the ball is passed to them, they're nearer to the opponents' goal line than both the ball and the second-to-last defender, and they're in the opponents' half. Being level counts as onside, and you can't be offside from a throw-in or a goal kick.",
    "In short: when a teammate passes forward, at least two defenders (usually the goalkeeper and one other) must be level with or behind you. If not, you're offside."],
   []],
  [["How do I practise an instrument efficiently when I only have twenty minutes a day?", "What's the best way to structure a short music practice?"],
   ["Split it up: five minutes of warm-up or scales, ten minutes on the one hardest passage played slowly, and five minutes playing something you enjoy. Slow, focused repetition beats playing the whole piece badly over and over.",
    "Pick one goal per session, play it slowly with a metronome, and record yourself once a week. Short daily practice works better than one long weekly session."],
   []],
  [["I have to give a presentation at work and I'm dreading it.", "How do I stop shaking when I speak in public?"],
   ["That's really common. Practise out loud several times, ideally in front of someone. Learn your first two sentences by heart so the start feels solid, and slow your breathing before you begin. The audience wants you to do well.",
    "Nerves are normal, and they usually look much smaller from the outside than they feel. Rehearse, arrive early to get used to the room, and focus on one friendly face. Pausing is fine: it feels long to you but natural to them."],
   [["Learning the first two sentences is a good idea.", "Once the start goes well, the rest tends to follow.", 0]]],
  [["I'm giving a short toast at a friend's wedding. How long should it be?", "Help me structure a wedding toast."],
   ["Two to three minutes is plenty. A simple structure: who you are, a short warm story about the couple, a line about what makes them good together, and then raise a glass. Avoid in-jokes that half the room won't get.",
    "Keep it short and warm: an opening line, one story, a sincere wish for their future, and the toast itself. Practise it out loud and time it."],
   []],
  [["Can you help me write a thank-you note to a neighbour who fed the cat while we were away?", "I want to thank a neighbour for watering the plants. Something short."],
   ["Here's one: \"Thank you so much for looking after things while we were away. It made such a difference knowing everything was in good hands. We brought you a little something from the trip. Let us know if we can ever return the favour!\"",
    "Try: \"A huge thank you for keeping everything alive while we were gone. We really appreciate it. Please let us return the favour any time.\" A small gift or homemade biscuits always goes down well."],
   []],
  [["We're hosting six people for dinner on Saturday. What's an easy menu?", "Dinner party for six and I don't want to be stuck in the kitchen. Menu ideas?"],
   ["Go for dishes you can make ahead: a big salad or soup to start, a slow-cooked main like a stew or a tray bake, and a dessert that sets in the fridge, like a cheesecake or panna cotta. Then you're free to enjoy your guests.",
    "Think one-pot: a lasagne or a tagine can sit in the oven while you chat. Serve bread and a simple salad, and buy a good dessert if time is short. Nobody minds."],
   []],
  [["What wine goes with a fish dish?", "Red or white with salmon?"],
   ["White is the classic choice: a crisp Sauvignon Blanc or a Chablis with light fish, a fuller Chardonnay with richer sauces. With salmon, a light red like a Pinot Noir also works well.",
    "Salmon is flexible: a dry rosé, an oaked white, or a light, chilled red all pair nicely. Avoid heavy tannic reds, which can taste metallic with fish."],
   []],
  [["If it's 9 in the morning in London, what time is it in Tokyo?", "How do I find a meeting time that works across three time zones?"],
   ["Tokyo is usually eight or nine hours ahead of London, depending on daylight saving, so it would be around 5 or 6 in the evening there. A world clock widget makes this much easier.",
    "Use a time zone planner to line up everyone's working hours; there's often a small overlap window early morning for one side and evening for the other. Rotate who gets the awkward slot if it's a regular call."],
   []],
  [["Do you think I need an umbrella today? The sky looks grim.", "It's so grey out. Why is the weather always like this at the weekend?"],
   ["I can't see the sky from here, but if it looks grim, a small umbrella in your bag is cheap insurance. A weather app's hourly rain forecast is usually decent for the next few hours.",
    "It does feel that way! It's mostly memory bias: rainy weekends stick in our minds more than rainy Tuesdays. Hopefully it clears up later."],
   [["Ha, memory bias. That's very reassuring.", "Science is on your side, if not the weather.", 1]]],
  [["Recommend a film for tonight? Something funny.", "We can't decide on a film. Any ideas for a cosy night in?"],
   ["For something funny and easy, a classic comedy from the nineties or a recent ensemble comedy tends to please everyone. If you want cosy, an animated film for adults and kids alike is hard to beat.",
    "How about a heist comedy? They're fun, fast, and rarely divisive. Or a feel-good film about food; those are perfect for a night in with snacks."],
   []],
  [["Suggest some board games for a group of six adults.", "What's a good board game for a family get-together?"],
   ["Party games with simple rules work well for six: word-guessing games, drawing games, or a social deduction game where players bluff. If people like strategy, a cooperative game keeps everyone involved.",
    "Pick something quick to learn: a card game with short rounds, a trivia game with teams, or a cooperative puzzle game. Avoid anything that takes an hour just to explain."],
   []],
  [["The kitchen tap keeps dripping. Can I fix that myself?", "How hard is it to change a washer on a dripping tap?"],
   ["Usually, yes. Turn off the water supply under the sink, open the tap to drain it, then remove the handle and the valve to get at the washer or cartridge. Take the old part to a hardware shop so you can match it.",
    "It's one of the easier repairs. The key is to turn off the water first and lay a cloth in the sink so small parts don't disappear down the drain. Ten minutes and a spanner, usually."],
   [["The cloth tip is smart. I've lost screws that way before.", "Everyone has! The plughole is a hungry beast.", 1]]],
  [["How often should I oil a bike chain?", "My bike chain squeaks. What should I use on it?"],
   ["Roughly every few hundred kilometres, or after riding in the rain. Use a proper bike chain lubricant rather than cooking oil, apply a drop to each link, spin the pedals, and wipe off the excess.",
    "A squeak means it's dry. Clean off the grime with a rag, then apply a bike-specific lube and wipe away the excess. Wet lube suits rainy conditions; dry lube suits dusty ones."],
   []],
  [["My car insurance renewal went up by a lot. Is it worth shopping around?", "What does an excess mean on car insurance?"],
   ["Almost always. Renewal prices are often higher than what new customers pay, so comparing quotes can save a lot. Check the excess, the level of cover and any extras before switching.",
    "The excess is the amount you pay towards a claim before the insurer pays the rest. A higher voluntary excess lowers the premium, but make sure you could afford it if you needed to claim."],
   []],
  [["When's the deadline for filing a tax return, usually?", "I keep putting off my tax return. How do I make it less painful?"],
   ["It depends on where you live, so check your tax authority's website. To make it easier, keep a folder for the year's documents and set a reminder a month before the deadline.",
    "Break it into chunks: one evening to gather documents, one to fill it in, one to check it. Doing it early also means any refund arrives sooner."],
   []],
  [["Is a password manager actually safe?", "Should I use the same password for everything if it's a strong one?"],
   ["A reputable password manager is much safer than reusing passwords. Use a strong master passphrase and turn on two-factor authentication. That way every site gets its own long, random password.",
    "Please don't! If one site leaks, attackers try the same password everywhere. A password manager removes the need to remember them all."],
   []],
  [["How do I look up a value from another sheet in a spreadsheet?", "What's the difference between VLOOKUP and XLOOKUP?"],
   ["Use a lookup function: give it the value you're searching for, the range on the other sheet, and which column to return. XLOOKUP is easier if your spreadsheet has it, because it can look left and defaults to an exact match.",
    "XLOOKUP is the newer, more flexible version: it doesn't need a column number and can search in any direction. VLOOKUP only looks to the right and needs you to ask for an exact match explicitly."],
   []],
  [["How would you say 'could I have the bill, please' in French?", "How do you politely ask for the bill in French?"],
   ["\"L'addition, s'il vous plaît\" is the standard phrase. If you want to be extra polite: \"Est-ce que je pourrais avoir l'addition, s'il vous plaît ?\"",
    "You can say \"L'addition, s'il vous plaît.\" Catching the waiter's eye and making a little writing gesture works almost everywhere too."],
   []],
  [["I want to try meditation but I can't sit still. Where do I start?", "Is five minutes of meditation a day worth it?"],
   ["Start tiny: two minutes of paying attention to your breath, and when your mind wanders, notice it and come back. Walking meditation is great for restless people. A guided app can help at first.",
    "Yes, consistency matters more than length. Five minutes daily can noticeably help with stress. Try it at the same time each day so it becomes a habit."],
   []],
  [["I've been procrastinating on a report all week. How do I get started?", "Any tricks for when you just can't start a task?"],
   ["Make the first step ridiculously small: open the document and write the headings. Set a timer for twenty-five minutes and promise yourself you can stop after that. Starting is the hardest part; momentum usually follows.",
    "Break it down until the next step feels easy, remove distractions for a short burst, and reward yourself afterwards. Sometimes writing a terrible first draft on purpose takes the pressure off."],
   [["A terrible first draft on purpose. I can do that.", "That's the spirit. You can fix a bad page, but not a blank one.", 1]]],
  [["What's a nice gift for parents celebrating forty years of marriage?", "My aunt and uncle have a big anniversary coming up. Gift ideas?"],
   ["Ruby is traditional for forty years: ruby-red flowers, a piece of jewellery, or something personal like a photo book of their years together. An experience they can share, like a nice dinner or a short trip, is also lovely.",
    "Something personal works best: a photo book, a framed print of the place they met, or a dinner with the whole family. Letters from relatives collected in a box can be incredibly moving."],
   []],
  [["The people upstairs play music until two in the morning. How do I bring it up nicely?", "How do I talk to noisy neighbours without starting a feud?"],
   ["Pick a calm moment, not two in the morning, and keep it friendly: mention that sound carries more than they might realise and ask if they could turn it down after eleven. Most people are embarrassed and cooperative.",
    "Assume good faith: they may not know how much you can hear. A friendly knock or a polite note usually works. Keep a record of dates in case you need to escalate later."],
   []],
  [["Can I compost in a small flat?", "How do you start composting without a garden?"],
   ["Yes: a small bokashi bin or a worm bin can live under a sink or on a balcony. Check whether your council collects food waste too, which is even easier.",
    "A countertop caddy and your council's food-waste collection is the simplest route. If you want your own compost, a worm bin is compact and surprisingly odourless."],
   []],
  [["What do we need for a first camping trip with kids?", "Help me make a camping checklist."],
   ["Tent (practise pitching it at home first), sleeping bags and mats, head torches, a stove and fuel, a pan, mugs, plenty of layers, waterproofs, a first-aid kit, and something for rainy spells like cards. Kids love having their own torch.",
    "Shelter, sleep, cooking, clothing and safety: tent, sleeping gear, a stove, warm layers, and a first-aid kit. Add marshmallows. Always add marshmallows."],
   []],
  [["Write me a short poem about autumn, four lines.", "Can you write a little rhyme about rain for a birthday card?"],
   ["Here's one: \"The maple lets its embers fall, / the evening comes too soon; / the kettle hums, the shadows stretch, / beneath a copper moon.\"",
    "Try: \"May every rainy day you meet / bring puddles worth a jump, / and may the sun come out at last / to dry your soggy... lump.\" Maybe a kinder last line: \"and may the sun come out at last / on every wish you have.\""],
   [["Ha, lovely.", "Glad you like it!"]]],
  [["What's the difference between baking soda and baking powder?", "Can I swap baking powder for bicarbonate of soda?"],
   ["Baking soda is pure sodium bicarbonate and needs an acid, like yoghurt or lemon, to activate. Baking powder already contains the acid. You can't swap them one for one: use about three times as much baking powder as the soda a recipe asks for.",
    "Not directly. Bicarbonate is much stronger and needs acid in the recipe; baking powder has its own. Swapping can leave a metallic taste or a flat bake."],
   []],
  [["How long do I boil an egg for a runny yolk?", "Soft-boiled egg timing, please. I always get it wrong."],
   ["For a large egg straight from the fridge, about six minutes in gently boiling water gives a set white and a runny yolk. Put it in cold water for a minute afterwards to stop it cooking.",
    "Lower the egg into water that's already boiling and time six to six and a half minutes. Then cool it briefly under the cold tap so it's easy to peel."],
   []],
  [["Can you explain inflation simply?", "Why does everything cost more every year?"],
   ["Inflation is the general rise in prices over time, meaning each pound or dollar buys a bit less. It happens when demand outpaces supply, when costs like energy rise, or when a lot of money circulates. Central banks try to keep it around two percent.",
    "Mostly because of inflation: costs for businesses rise, wages rise, and prices follow. A little inflation is considered healthy; big jumps are what hurt household budgets."],
   []],
  [["How do I clean a cast iron pan without ruining it?", "My cast iron pan has rust spots. Is it ruined?"],
   ["Rinse it with hot water and a brush while it's still warm, dry it completely on the hob, and rub in a thin layer of oil. A little soap now and then is fine despite what people say.",
    "Not ruined at all. Scrub the rust off with steel wool, wash and dry it thoroughly, then coat it with a thin layer of oil and bake it upside down in a hot oven for an hour."],
   []],
  [["How do I answer 'what's your biggest weakness' in an interview?", "Interview tomorrow. What questions should I prepare for?"],
   ["Pick a real but manageable weakness and show what you're doing about it, for example: \"I used to take on too much myself; now I delegate earlier and check in with the team.\" Avoid clichés like perfectionism.",
    "Prepare for: tell me about yourself, why this role, a time you handled a conflict, a mistake you learned from, and your questions for them. Have two or three stories ready that you can adapt."],
   [["Thanks, I'll practise tonight.", "Good luck! You'll do great."]]],
  [["I'm terrible at remembering names. Any tricks?", "How do people remember everyone's name at parties?"],
   ["Repeat the name straight away (\"Nice to meet you, Joe\"), link it to something vivid about the person, and use it once more before you part. Writing names down afterwards helps too.",
    "Most people who are good at it simply pay attention at the moment of introduction and say the name back. It also helps to ask how it's spelled if it's unusual."],
   []],
  [["It's boiling in the flat. How do I keep it cool without air con?", "Any tips for sleeping in a heatwave?"],
   ["Close curtains and windows during the day on the sunny side, then open everything at night for a cross-breeze. A bowl of ice in front of a fan helps a little, and cotton sheets are much cooler than synthetic ones.",
    "Take a lukewarm shower before bed, sleep under a thin cotton sheet, and put a damp flannel on your wrists or neck. Keep blinds shut all day so the heat doesn't build."],
   []],
  [["We're having a picnic on Sunday. What food travels well?", "Picnic ideas that don't get soggy?"],
   ["Sturdy things: sausage rolls, frittata slices, grain salads, cheese and crackers, crudités with hummus, and fruit that doesn't bruise, like grapes and apples. Freeze a few water bottles to use as ice packs.",
    "Pack salads with the dressing separate, choose firm breads, and bring something sweet that holds its shape, like flapjacks. A cool bag and a frozen bottle keep things fresh."],
   []],
  [["There's a huge moth in the bedroom and I refuse to go in.", "How do I get a moth out of the house without hurting it?"],
   ["Turn off the bedroom light, open the window, and leave a light on outside or in the hall. Moths head for the light, so it will usually find its own way out. A glass and a piece of card works too if you're brave.",
    "Dim the room and open a window; moths are drawn to light, so they'll often leave on their own. Or gently trap it under a cup and slide paper underneath."],
   [["I'm not brave.", "Then the light trick it is. Let the moth do the work.", 0]]],
  [["Why do onions make you cry?", "Is there a trick to chopping onions without crying?"],
   ["Cutting an onion releases enzymes that produce a gas which irritates your eyes. Chilling the onion first, using a very sharp knife, and cutting the root end last all reduce it.",
    "A sharp knife crushes fewer cells, so less of the irritating gas escapes. Chilling the onion for fifteen minutes helps too, as does working near an open window or a cooker hood."],
   []],
  [["How do I get my toddler to eat vegetables?", "My nephew refuses anything green. Any ideas?"],
   ["Keep offering without pressure: it can take ten or more tries before a child accepts a new food. Let them help cook, serve vegetables alongside foods they like, and eat them yourself in front of them.",
    "Make it playful: dips, funny shapes, or letting them pick vegetables at the shop. Pressure usually backfires; repeated, relaxed exposure works best."],
   []],
  [["I keep forgetting to drink water during the day.", "How much water should I actually drink?"],
   ["A big bottle on your desk that you refill at set times is the simplest fix. Linking a glass of water to things you already do, like each coffee or each meeting, helps build the habit.",
    "It varies, but most guidance suggests around six to eight glasses of fluid a day, more in hot weather or if you're active. Pale yellow urine is a decent sign you're drinking enough."],
   []],
  [["What's a good houseplant for a dark bathroom?", "Which plants are almost impossible to kill?"],
   ["Ferns and pothos cope well with low light and like the humidity of a bathroom. Snake plants and ZZ plants are famously tough and forgive forgotten watering.",
    "Try a snake plant, a ZZ plant, or a pothos: all tolerate low light and irregular watering. Most houseplant deaths are from overwatering, so err on the dry side."],
   []],
  [["Can you summarise the plot of Hamlet in three sentences?", "Quick: what happens in Macbeth?"],
   ["Prince Hamlet learns from his father's ghost that his uncle Claudius murdered the king and married his mother. Hamlet feigns madness while he hesitates over revenge, and his actions lead to the deaths of Polonius and Ophelia. In the final duel, nearly everyone dies, Hamlet included, after he finally kills Claudius.",
    "Macbeth, a Scottish general, hears three witches prophesy that he'll be king. Spurred by his wife, he murders King Duncan and takes the throne, then kills more people to keep it. Guilt and paranoia destroy them both, and Macbeth is killed in battle."],
   []],
  [["How do I get red wine out of a carpet?", "Spilled coffee on a white shirt. Help!"],
   ["Blot, don't rub, with a clean cloth, then pour a little cold water on and blot again. A paste of washing-up liquid and water or a carpet stain remover usually lifts the rest. Avoid hot water, which can set the stain.",
    "Rinse it from the back with cold water as soon as you can, then rub in a little washing-up liquid or stain remover and wash as usual. Don't tumble dry until the stain is gone."],
   []],
];

const OPENERS = [
  ["Hey, it's me again.", "Hi! Good to hear from you. What's on your mind today?"],
  ["Morning!", "Good morning! How can I help?"],
  ["Hi there, have you got a minute?", "Always. What do you need?"],
  ["Evening. Long day.", "Sounds like it. Want to talk it through, or shall we get something done?"],
  ["Hello again!", "Hello! What are we working on today?"],
  ["Right, I've got a few random questions today.", "Fire away, I'm ready."],
  ["Hey. I need a bit of help with some stuff.", "Happy to help. Where shall we start?"],
  ["Ugh, Mondays.", "Mondays can be rough. Let's make this one a bit easier."],
  ["Happy Friday!", "Happy Friday to you too! Any plans for the weekend?"],
  ["Hi, it's been a while.", "Welcome back! What's new?"],
  ["Good afternoon.", "Good afternoon! What can I do for you?"],
  ["Quick one before I head out.", "Sure, go ahead."],
];

const CLOSERS = [
  ["That's all for now, thanks!", "Anytime. Have a good one!"],
  ["Gotta run, talk later.", "Talk soon!"],
  ["Okay, I think that's everything.", "Great. Good luck with it all."],
  ["Thanks, this was really helpful.", "I'm glad! Come back whenever you like."],
  ["Right, bedtime for me.", "Sleep well!"],
  ["Cheers, speak tomorrow probably.", "Looking forward to it."],
  ["Perfect. I'll let you know how it goes.", "Please do, I'd love to hear."],
];

const FOLLOW_UPS = [
  ["Thanks, that's really useful.", "You're welcome! Let me know if anything else comes up."],
  ["Hmm, can you make that a bit shorter?", "Sure. In short: keep it simple, do the most important part first, and adjust as you go."],
  ["Ha, fair enough.", "I thought you'd appreciate that."],
  ["What would you do in my position?", "I'd start with the smallest step you can take today, then see how it feels before committing to more."],
  ["Okay, noted.", "Great. Anything else?"],
  ["Makes sense.", "Glad it helps."],
  ["Oh, I didn't know that!", "It surprises a lot of people."],
  ["I'll give it a try this week.", "Sounds good. Let me know how it goes."],
  ["Is there a cheaper option?", "Usually, yes: the simplest version of it works almost as well, and second-hand is worth a look."],
  ["You're a lifesaver.", "Happy to help!"],
];

const CHAT = [
  ["Sorry, I got distracted. Where were we?", "No problem! We can pick up wherever you like."],
  ["It's been such a long week.", "It sounds like it. Is there anything I can take off your plate?"],
  ["I just made the best cup of tea.", "There's nothing quite like it. Enjoy!"],
  ["Do you ever get bored of people asking you random stuff?", "Not at all, random questions are my favourite kind."],
  ["I think I need a holiday.", "Everyone does at some point. Even a long weekend can reset things."],
  ["The weather is actually nice for once.", "Make the most of it! Even a short walk in the sun helps."],
  ["I can't believe it's already the end of the month.", "Time flies. Anything you want to get done before the new month starts?"],
  ["Haha, okay, that made me laugh.", "Mission accomplished."],
];

const BRIDGES = ["Anyway,", "Unrelated, but", "Also,", "Oh, and", "Separate question:", "Totally different topic:", "While I think of it,", ""];
const LEAD_INS = ["Quick life update!", "Guess what?", "So, news.", "Random thing:", "Ugh.", "Okay, so.", "", "", "", ""];
const Q_PREFIXES = ["", "", "", "", "Remind me: ", "Quick question: ", "Sorry, I forgot: ", "I can't remember. ", "Help me out here: "];
const AGAIN_REPLIES = ["Ha, that sounds about right.", "Oh no! Hopefully it sorts itself out soon.", "Well, that's one way to spend an evening.",
  "Never a dull moment at yours!", "Oh dear. Sending sympathy."];
const FACT_FOLLOW_UPS = [["Yeah, we'll see how it goes.", "Keep me posted!"], ["Thanks. It's a lot, but it's good.", "It really does sound like it."],
  ["Anyway, that's my news.", "Thanks for sharing it with me."], ["I know, right?", "Ha, absolutely."]];

// ── Generation ───────────────────────────────────────────────────────────────────────────────────

/** Draws from the pools: `one` without replacement within a conversation (then with). */
function draw(r) {
  const used = new Map();
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  return {
    r, pick,
    one(pool) {
      const xs = POOLS[pool];
      if (!xs) throw new Error(`corpus: no pool ${pool}`);
      const u = used.get(pool) ?? new Set();
      used.set(pool, u);
      const free = xs.map((_, i) => i).filter((i) => !u.has(i));
      const i = free.length ? pick(free) : Math.floor(r() * xs.length);
      u.add(i);
      return xs[i];
    },
  };
}

function shuffle(r, xs) {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [a[i], a[j]] = [a[j], a[i]]; }
  return a;
}

const fill = (t, v, old = {}) => t.replace(/\{(\^?)(old\.)?(\w+)\}/g, (_, cap, o, k) => {
  const x = (o ? old : v)[k];
  if (typeof x !== "string") throw new Error(`corpus: no value for {${o ?? ""}${k}} in ${JSON.stringify(t)}`);
  return cap ? x[0].toUpperCase() + x.slice(1) : x;
});
/** `a` then `b`; after a bridge that does not end a sentence ("Anyway,", "Oh, and"), `b`'s first
 * letter lowered (not for "I"; the filler's requests start with common words, never a name). */
function join(a, b) {
  if (!a) return b;
  if (!b) return a;
  if (!/[.!?:]$/.test(a) && /^[A-Z][a-z]/.test(b) && !/^I\b/.test(b)) return `${a} ${b[0].toLowerCase()}${b.slice(1)}`;
  return `${a} ${b}`;
}

/** Builds the corpus: `count` conversations from `seed`. */
export function buildConversations({ count = 8, seed = 20261127 } = {}) {
  const conversations = [];
  for (let c = 0; c < count; c++) conversations.push(buildOne(c, mulberry32(seed + 7919 * c)));
  return { seed, conversations };
}

function buildOne(ci, r) {
  const d = draw(r);
  const pick = d.pick;
  const id = `c${String(ci + 1).padStart(2, "0")}`;
  const user = POOLS.userNames[ci % POOLS.userNames.length];
  const nSessions = 8 + Math.floor(r() * 5);

  // The facts and their versions.
  const types = shuffle(r, T).slice(0, 18 + Math.floor(r() * 7));
  const facts = types.map((t) => {
    const v0 = t.values(d);
    const changed = !!t.change && r() < t.change.p;
    const versions = [{ values: v0, keys: t.keys, tpl: t, turns: [] }];
    if (changed) versions.push({ values: { ...v0, ...t.change.values(d, v0) }, keys: t.change.keys, tpl: t.change, turns: [] });
    return { id: `${id}.${t.type}`, type: t.type, t, changed, versions };
  });

  // Events: statements, changes (a later session), mentions again (a later session still).
  const events = [];
  const between = (lo, hi) => (hi > lo ? lo + Math.floor(r() * (hi - lo)) : null); // [lo, hi)
  for (const f of facts) {
    const s0 = f.changed ? between(0, nSessions - 2) : between(0, nSessions);
    events.push({ session: s0, kind: "state", fact: f, v: 0 });
    let end = nSessions;
    if (f.changed) {
      const s1 = between(s0 + 1, nSessions);
      events.push({ session: s1, kind: "state", fact: f, v: 1 });
      end = s1;
      if (f.versions[1].tpl.again && r() < 0.45 && s1 + 1 < nSessions) events.push({ session: between(s1 + 1, nSessions), kind: "again", fact: f, v: 1 });
    }
    if (f.t.again && r() < 0.45 && s0 + 1 < end) events.push({ session: between(s0 + 1, end), kind: "again", fact: f, v: 0 });
  }

  // Filler: each user text once per conversation while any is left.
  const usedFiller = new Set();
  const nextFiller = () => {
    const free = [];
    FILLER.forEach((f, i) => f[0].forEach((_, j) => { if (!usedFiller.has(`${i}.${j}`)) free.push([i, j]); }));
    const [i, j] = free.length ? pick(free) : [Math.floor(r() * FILLER.length), 0];
    usedFiller.add(`${i}.${j}`);
    const [us, as, follow] = FILLER[i];
    return { u: us[j], a: as[j], follow: (follow ?? []).filter((x) => x[2] === undefined || x[2] === j).map(([fu, fa]) => [fu, fa]) };
  };

  const sessions = [];
  for (let s = 0; s < nSessions; s++) {
    const target = 20 + 2 * Math.floor(r() * 21); // 20 … 60 turns
    const exchanges = [];
    for (const ev of shuffle(r, events.filter((e) => e.session === s))) exchanges.push(factExchange(ev));
    const opener = r() < 0.85 ? [[pick(OPENERS)[0], null], [pick(OPENERS)[1], null]] : null;
    if (opener) { const o = pick(OPENERS); opener[0][0] = o[0]; opener[1][0] = o[1]; }
    const closer = r() < 0.6 ? pick(CLOSERS).map((t) => [t, null]) : null;
    let n = exchanges.reduce((a, x) => a + x.length, 0) + (opener ? 2 : 0) + (closer ? 2 : 0);
    while (n < target) {
      let x;
      if (r() < 0.15) x = pick(CHAT).map((t) => [t, null]);
      else {
        const f = nextFiller();
        x = [[f.u, null], [f.a, null]];
        if (r() < 0.45) x.push(...(f.follow.length && r() < 0.6 ? pick(f.follow) : pick(FOLLOW_UPS)).map((t) => [t, null]));
      }
      exchanges.push(x);
      n += x.length;
    }
    const order = [...(opener ? [opener] : []), ...shuffle(r, exchanges), ...(closer ? [closer] : [])];
    const sid = `s${String(s + 1).padStart(2, "0")}`;
    const turns = order.flat().map(([text, carries], k) => ({
      id: `${id}-${sid}-t${String(k + 1).padStart(3, "0")}`, role: k % 2 ? "assistant" : "user", text, carries: carries ? [carries] : [],
    }));
    sessions.push({ id: sid, turns });
  }

  function factExchange(ev) {
    const f = ev.fact;
    const ver = f.versions[ev.v];
    const tpl = ver.tpl;
    const old = f.versions[0].values;
    const tag = { fact: f, v: ev.v };
    const said = fill(pick(ev.kind === "again" ? tpl.again : tpl.state), ver.values, old);
    const echo = ev.kind === "state" && tpl.echo?.length && r() < 0.35;
    const reply = ev.kind === "again" ? pick(AGAIN_REPLIES) : echo ? fill(pick(tpl.echo), ver.values, old) : pick(tpl.react);
    const lead = ev.kind === "state" ? pick(LEAD_INS) : "";
    if (r() < (ev.kind === "again" ? 0.7 : 0.35)) {
      const x = nextFiller();
      return [[join(join(lead, said), join(pick(BRIDGES), x.u)), tag], [ev.kind === "again" ? x.a : `${reply} ${x.a}`, echo ? tag : null]];
    }
    const out = [[join(lead, said), tag], [reply, echo ? tag : null]];
    if (r() < 0.5) out.push(...pick(FACT_FOLLOW_UPS).map((t) => [t, null]));
    return out;
  }

  // Which turns carry which version.
  const allTurns = sessions.flatMap((s) => s.turns);
  for (const t of allTurns) {
    t.carries = t.carries.map(({ fact: f, v }) => { f.versions[v].turns.push(t.id); return `${f.id}@${v}`; });
  }

  // Questions.
  const questions = [];
  const qp = () => pick(Q_PREFIXES);
  const phrase = (prefix, q) => (prefix.endsWith(": ") ? prefix + q[0].toLowerCase() + q.slice(1) : prefix + q);
  for (const f of facts) {
    if (f.changed) {
      const [v0, v1] = f.versions;
      for (const q of shuffle(r, v1.tpl.ask).slice(0, 2)) {
        const asks = v1.keys.filter((k) => v1.values[k] !== v0.values[k]);
        questions.push({ intent: "current", q: phrase(qp(), fill(q, v1.values)), fact: f.id, version: 1, asks, answers: [...v1.turns], outdated: [...v0.turns] });
      }
      continue;
    }
    const v0 = f.versions[0];
    const lex = f.t.ask.filter((a) => a[0] === "lexical");
    const para = shuffle(r, f.t.ask.filter((a) => a[0] === "paraphrase")).slice(0, 1 + (r() < 0.6 ? 1 : 0));
    for (const [intent, q, asks] of [...para, ...lex]) {
      questions.push({ intent, q: phrase(qp(), fill(q, v0.values)), fact: f.id, version: 0, asks: [asks], answers: [...v0.turns], outdated: [] });
    }
  }
  const rare = rareWords(allTurns);
  const byId = new Map(allTurns.map((t) => [t.id, t]));
  questions.forEach((q, i) => {
    q.id = `${id}.q${String(i + 1).padStart(3, "0")}`;
    q.shared = sharedRare(q.q, q.answers.map((a) => byId.get(a).text), rare);
    q.kind = q.intent === "current" ? "current" : q.shared.length ? "lexical" : "paraphrase";
  });

  return {
    id, agent: `conv-${id}`, user,
    sessions: sessions.map((s) => ({ id: s.id, turns: s.turns })),
    facts: facts.map((f) => ({ id: f.id, type: f.type, changed: f.changed, versions: f.versions.map((v) => ({ values: pickKeys(v.values, v.keys), turns: v.turns })) })),
    questions: questions.map(({ id: qid, kind, intent, q, fact: fid, version, asks, answers, outdated, shared }) => ({ id: qid, kind, intent, q, fact: fid, version, asks, answers, outdated, shared })),
  };
}

const pickKeys = (v, keys) => Object.fromEntries(keys.map((k) => [k, v[k]]));

/** The stems occurring in at most 2 % of the turns (at least 2), stop words aside. */
function rareWords(turns) {
  const df = new Map();
  for (const t of turns) for (const w of new Set(tokens(t.text))) df.set(w, (df.get(w) ?? 0) + 1);
  const max = Math.max(2, Math.floor(0.02 * turns.length));
  return new Set([...df].filter(([, n]) => n <= max).map(([w]) => w));
}
/** The question's content stems that are rare and in one of the texts. */
function sharedRare(q, texts, rare) {
  const words = new Set(texts.flatMap((t) => tokens(t)));
  return [...new Set(rawTokens(q).filter((w) => !STOPWORDS.has(w)).map(stem))].filter((w) => rare.has(w) && words.has(w));
}

// ── Checks and counts ────────────────────────────────────────────────────────────────────────────

const norm = (t) => String(t).normalize("NFD").replace(/\p{M}+/gu, "").toLowerCase();
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** `text` contains `value` as whole words (case and accents ignored). */
export const contains = (text, value) => new RegExp(`(^|[^\\p{L}\\p{N}])${escape(norm(value))}($|[^\\p{L}\\p{N}])`, "u").test(norm(text));
const ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Problems of the corpus, as strings (none expected). */
export function checkCorpus({ conversations }) {
  const problems = [];
  for (const c of conversations) {
    const say = (m) => problems.push(`${c.id}: ${m}`);
    if (!ID.test(c.agent)) say(`agent name ${c.agent}`);
    const turns = c.sessions.flatMap((s) => s.turns);
    const byId = new Map();
    const order = new Map();
    for (const s of c.sessions) {
      if (!ID.test(s.id)) say(`session id ${s.id}`);
      s.turns.forEach((t, k) => {
        if (byId.has(t.id)) say(`duplicate turn id ${t.id}`);
        if (!ID.test(t.id)) say(`turn id ${t.id}`);
        if (t.role !== (k % 2 ? "assistant" : "user")) say(`${t.id}: role ${t.role} out of turn`);
        if (!t.text.trim() || t.text.length > 4000) say(`${t.id}: text length ${t.text.length}`);
        byId.set(t.id, t);
        order.set(t.id, order.size);
      });
    }
    // Every carrier says the version; every turn that says a version carries it (or a later one).
    for (const f of c.facts) {
      f.versions.forEach((v, k) => {
        const tag = `${f.id}@${k}`;
        if (!v.turns.length) say(`${tag}: no turn carries it`);
        for (const tid of v.turns) {
          const t = byId.get(tid);
          if (!t) { say(`${tag}: unknown turn ${tid}`); continue; }
          for (const [key, value] of Object.entries(v.values)) if (!contains(t.text, value)) say(`${tag}: ${tid} lacks ${key} ${JSON.stringify(value)}: ${t.text}`);
        }
        for (const t of turns) {
          if (t.carries.includes(tag)) continue;
          if (t.carries.some((x) => x.startsWith(`${f.id}@`) && Number(x.split("@")[1]) > k)) continue;
          if (Object.values(v.values).every((value) => contains(t.text, value))) say(`${tag}: ${t.id} says ${JSON.stringify(v.values)} unmarked: ${t.text}`);
        }
      });
      if (f.changed) {
        const lastOld = Math.max(...f.versions[0].turns.map((t) => order.get(t)));
        const firstNew = Math.min(...f.versions[1].turns.map((t) => order.get(t)));
        if (!(lastOld < firstNew)) say(`${f.id}: an old version's turn after the correction`);
      }
    }
    const facts = new Map(c.facts.map((f) => [f.id, f]));
    const rare = rareWords(turns);
    for (const q of c.questions) {
      const sayQ = (m) => say(`${q.id} ${JSON.stringify(q.q)}: ${m}`);
      const f = facts.get(q.fact);
      if (!f) { sayQ("unknown fact"); continue; }
      const v = f.versions[q.version];
      if (!q.answers.length) sayQ("no answering turn");
      for (const a of q.answers) if (!byId.get(a)?.carries.includes(`${f.id}@${q.version}`)) sayQ(`answer ${a} does not carry the version`);
      for (const o of q.outdated) {
        if (!byId.has(o)) sayQ(`unknown outdated turn ${o}`);
        if (q.answers.includes(o)) sayQ(`${o} both answer and outdated`);
      }
      if (q.kind === "current" && (!f.changed || q.version !== f.versions.length - 1 || !q.outdated.length)) sayQ("current question without an outdated version");
      for (const k of q.asks) if (contains(q.q, v.values[k])) sayQ(`contains the value it asks for (${v.values[k]})`);
      const shared = sharedRare(q.q, q.answers.map((a) => byId.get(a)?.text ?? ""), rare);
      if (q.kind === "lexical" && !shared.length) sayQ("lexical without a rare word in common");
      if (q.kind === "paraphrase" && shared.length) sayQ(`paraphrase sharing ${shared.join(", ")}`);
    }
  }
  return problems;
}

/** Counts for the bench's header. */
export function corpusStats({ conversations }) {
  const s = { conversations: conversations.length, sessions: 0, turns: 0, userTurns: 0, words: 0, facts: 0, changed: 0, answerTurns: 0, questions: 0, byKind: {}, written: {} };
  for (const c of conversations) {
    s.sessions += c.sessions.length;
    for (const t of c.sessions.flatMap((x) => x.turns)) { s.turns++; if (t.role === "user") s.userTurns++; s.words += rawTokens(t.text).length; }
    s.facts += c.facts.length;
    s.changed += c.facts.filter((f) => f.changed).length;
    for (const q of c.questions) {
      s.questions++;
      s.answerTurns += q.answers.length;
      s.byKind[q.kind] = (s.byKind[q.kind] ?? 0) + 1;
      const w = `${q.intent}→${q.kind}`;
      s.written[w] = (s.written[w] ?? 0) + 1;
    }
  }
  const perConv = conversations.map((c) => c.sessions.reduce((a, x) => a + x.turns.length, 0));
  s.turnsPerConversation = [Math.min(...perConv), Math.max(...perConv)];
  const perSession = conversations.flatMap((c) => c.sessions.map((x) => x.turns.length));
  s.turnsPerSession = [Math.min(...perSession), Math.max(...perSession)];
  return s;
}
