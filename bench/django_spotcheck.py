#!/usr/bin/env python3
"""Django spot check of the retrieval engine (issue 4).

Django holds over a third of SWE-bench Lite's instances, and its history is too large to fetch
on this project's machines, so this searches Django's 4.2.16 release (the sdist, from PyPI) with
SWE-bench Lite Django issues written down from memory: QUERIES are 20 reports with their bodies,
TITLES 89 titles alone, each with the file its fix changed (titles whose file is not in 4.2 are
skipped). A spot check, not a benchmark: the texts are approximate and the tree is newer than the
issues. It prints fused recall@1/5/10 and MRR over each group; `-v` lists every rank.

    cargo build --release --bin airlock
    python3 bench/django_spotcheck.py target/release/airlock [-v] [--django DIR]

Without `--django` it downloads the sdist with pip into a temporary directory and commits it into
a scratch git repository there (the engine indexes commits); the index is built in that
directory too (about 6 s on 2 cores) and removed with it.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile

DJANGO = "django==4.2.16"

QUERIES = [
("django/contrib/auth/validators.py", """UsernameValidator allows trailing newline in usernames
Description
ASCIIUsernameValidator and UnicodeUsernameValidator use the regex r'^[\\w.@+-]+$'. The intent is to only allow alphanumeric characters as well as ., @, +, and -. However, a little known quirk of Python regexes is that $ will match a trailing newline. Therefore, the user name validators will accept usernames which end with a newline. You can avoid this behavior by instead using \\A and \\Z to terminate regexes. For example, the validator regex could be changed to r'\\A[\\w.@+-]+\\Z' in order to reject usernames that end with a newline."""),
("django/http/response.py", """HttpResponse doesn't handle memoryview objects
Description
I am trying to write a BinaryField retrieved from the database into a HttpResponse. When the database is Sqlite this works correctly, but Postgresql returns the contents of the field as a memoryview object and it seems like current Django doesn't like this combination:
from django.http import HttpResponse
# String content
response = HttpResponse("My Content")
response.content
# Out: b'My Content'
# This is correct
# Bytes content
response = HttpResponse(b"My Content")
response.content
# Out: b'My Content'
# This is also correct
# memoryview content
response = HttpResponse(memoryview(b"My Content"))
response.content
# Out: b'<memory at 0x7fcc47ab2648>'
# This is not correct, I am expecting b'My Content'"""),
("django/db/models/deletion.py", """delete() on instances of models without any dependencies doesn't clear PKs.
Description
Deleting any model with no dependencies not updates the PK on the model. It should be set to None after .delete() call.
See Django.db.models.deletion:276-281. Should update the model line 280."""),
("django/db/backends/base/creation.py", """`TransactionTestCase.serialized_rollback` fails to restore objects due to ordering constraints
Description
I hit this problem in a fairly complex projet and haven't had the time to write a minimal reproduction case. I think it can be understood just by inspecting the code so I'm going to describe it while I have it in mind.
Setting serialized_rollback = True on a TransactionTestCase triggers rollback emulation. In practice, for each database:
BaseDatabaseCreation.create_test_db calls connection._test_serialized_contents = connection.creation.serialize_db_to_string()
TransactionTestCase._fixture_setup calls connection.creation.deserialize_db_from_string(connection._test_serialized_contents)
(The actual code isn't written that way; it's equivalent but the symbol names are different.)
serialize_db_to_string orders models with serializers.sort_dependencies and serializes them. The sorting algorithm only deals with natural keys. It doesn't do anything to order models referenced by foreign keys before models containing said foreign keys. That wouldn't be possible in general because circular foreign keys are allowed.
deserialize_db_from_string deserializes and saves models without wrapping in a transaction. This can result in integrity errors if an instance containing a foreign key is saved before the instance it references."""),
("django/contrib/syndication/views.py", """Add support for item_comments to syndication framework
Description
Add comments argument to feed.add_item() in syndication.views so that item_comments can be defined directly without having to take the detour via item_extra_kwargs .
Additionally, comments is already explicitly mentioned in the feedparser, but not implemented in the view."""),
("django/db/models/query_utils.py", """"TypeError: cannot pickle" when applying | operator to a Q object
Description
Using a reference to a non-pickleable type of object such as dict_keys in a Q object makes the | operator fail:
>>> from django.db.models import Q
>>> Q(x__in={}.keys())
<Q: (AND: ('x__in', dict_keys([])))>
>>> Q() | Q(x__in={}.keys())
Traceback (most recent call last):
...
TypeError: cannot pickle 'dict_keys' object
Even though this particular example could be solved by doing Q() | Q(x__in={}) it still feels like using .keys() should work.
I can work on a patch if there's agreement that this should not crash."""),
("django/db/models/fields/__init__.py", """Correct expected format in invalid DurationField error message
Description
If you enter a duration "14:00" into a duration field, it translates to "00:14:00" which is 14 minutes.
The current error message for invalid DurationField says that this should be the format of durations: "[DD] [HH:[MM:]]ss[.uuuuuu]". But according to the actual behaviour, it should be: "[DD] [[HH:]MM:]ss[.uuuuuu]", because seconds are mandatory, minutes are optional, and hours are optional if minutes are provided.
This seems to be a mistake in all Django versions that support the DurationField.
Also the duration fields could have a default help_text with the requested format, because the syntax is not self-explanatory."""),
("django/utils/autoreload.py", """Auto-reloading with StatReloader very intermittently throws "ValueError: embedded null byte".
Description
Raising this mainly so that it's tracked, as I have no idea how to reproduce it, nor why it's happening. It ultimately looks like a problem with Pathlib, which wasn't used prior to 2.2.
Stacktrace:
Traceback (most recent call last):
  File "manage.py" ...
	execute_from_command_line(sys.argv)
  File "/Userz/kez/path/to/venv/lib/python3.6/site-packages/django/core/management/__init__.py", line 381, in execute_from_command_line
	utility.execute()
  File "/Userz/kez/path/to/venv/lib/python3.6/site-packages/django/utils/autoreload.py", line 577, in run_with_reloader
	start_django(reloader, main_func, *args, **kwargs)
  File "/Userz/kez/path/to/venv/lib/python3.6/site-packages/django/utils/autoreload.py", line 353, in iter_modules_and_files
	results.add(path.resolve().absolute())
  File "/Users/kez/.pyenv/versions/3.6.2/lib/python3.6/pathlib.py", line 1120, in resolve
	s = self._flavour.resolve(self, strict=strict)
ValueError: embedded null byte"""),
("django/core/checks/translation.py", """translation.E004 shouldn't be raised on sublanguages when a base language is available.
Description
According to Django documentation: If a base language is available but the sublanguage specified is not, Django uses the base language. For example, if a user specifies de-at (Austrian German) but Django only has de available, Django uses de.
However, when using Django 3.0.2, if my settings.py has LANGUAGE_CODE = "de-at" I get this error message:
SystemCheckError: System check identified some issues:
ERRORS:
?: (translation.E004) You have provided a value for the LANGUAGE_CODE setting that is not in the LANGUAGES setting.
If using LANGUAGE_CODE = "es-ar" Django works fine (es-ar is one of the translations provided out of the box)."""),
("django/views/debug.py", """Settings are cleaned insufficiently.
Description
Posting publicly any setting value used to be disclosed. SafeExceptionReporterFilter.get_safe_settings() returns cleansed settings, but only for dicts; other types of iterables are returned as is, so a setting with a list of dicts with secrets is leaked.
Example:
MY_SETTING = {"foo": "value", "secret": "value", "token": "value", "something": [{"foo": "value"}, {"secret": "value"}, {"token": "value"}]}
On Django 3.0 and below: import pprint; from django.views.debug import get_safe_settings; pprint.pprint(get_safe_settings()["MY_SETTING"])"""),
("django/contrib/admin/sites.py", """Added model class to app_list context
Description
I need to manipulate the app_list in my custom admin view, and the easiest way to get the result is to have access to the model class (currently the dictionary is a serialized model).
In addition I would make the _build_app_dict method public, as it is used by the two views index and app_index."""),
("django/forms/models.py", """ModelChoiceIteratorValue is not hashable.
Description
Recently I migrated from Django 3.0 to Django 3.1. In my code, I add custom data-* attributes to the select widget options. After the upgrade some of those options broke. Error is {TypeError}unhashable type: 'ModelChoiceIteratorValue'.
Example (this one breaks):
	def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
		context = super().create_option(name, value, label, selected, index, subindex, attrs)
		if not value:
			return context
		if value in self.show_fields: # This is a dict {1: ['first_name', 'last_name']}
			context['attrs']['data-fields'] = json.dumps(self.show_fields[value])"""),
("django/db/models/sql/query.py", """QuerySet.only() after select_related() crash on proxy models.
Description
When I optimize a query using select_related() and only() methods from the proxy model I encounter an error:
Traceback (most recent call last):
  File "D:\\study\\django_college\\manage.py", line 22, in <module>
	main()
  File "D:\\Anaconda3\\envs\\django\\lib\\site-packages\\django\\db\\models\\query.py", line 1225, in _fetch_all
	self._result_cache = list(self._iterable_class(self))
  File "D:\\Anaconda3\\envs\\django\\lib\\site-packages\\django\\db\\models\\query.py", line 51, in __iter__
	related_populators = get_related_populators(klass_info, select, db)
  File "D:\\Anaconda3\\envs\\django\\lib\\site-packages\\django\\db\\models\\query.py", line 2243, in get_related_populators
	rel_cls = RelatedPopulator(rel_klass_info, select, db)
  File "D:\\Anaconda3\\envs\\django\\lib\\site-packages\\django\\db\\models\\query.py", line 2220, in __init__
	self.pk_idx = self.init_list.index(self.model_cls._meta.pk.attname)
ValueError: 'id' is not in list
At django/db/models/sql/query.py in 745 line there is snippet:
opts = cur_model._meta
If I replace it by
opts = cur_model._meta.concrete_model._meta
all works as expected."""),
("django/contrib/auth/forms.py", """Accessing UserAdmin via to_field leads to link to PasswordResetForm being broken (404)
Description
Accessing the UserAdmin via another model's Admin that has a reference to User (with to_field set, e.g., to_field="uuid") leads to the UserAdmin being accessed via an url that looks similar to this one: .../user/22222222-3333-4444-5555-666677778888/change/?_to_field=uuid
However the underlying form looks like this: password.help_text = password.help_text.format("../password/")
This results in a link to the PasswordResetForm which is wrong (404). The fix is: password.help_text = password.help_text.format(f"../../{self.instance.pk}/password/")"""),
("django/db/migrations/serializer.py", """makemigrations produces incorrect path for inner classes
Description
When you define a subclass from django.db.models.Field as an inner class of some other class, and use this field inside a django.db.models.Model class, then when you run manage.py makemigrations, a migrations file is created which refers to the inner class as if it were a top-level class of the module it is in.
class Outer(object):
	class Inner(models.CharField):
		pass
class A(models.Model):
	field = Outer.Inner(max_length=20)
After running manage.py makemigrations, the generated migrations file contains the following:
migrations.CreateModel(name='A', fields=[('field', test1.models.Inner(max_length=20))])
Note the test1.models.Inner, which should have been test1.models.Outer.Inner."""),
("django/contrib/messages/storage/cookie.py", """Messages framework incorrectly serializes/deserializes extra_tags when it's an empty string
Description
When a message is serialised and then deserialised with any of the built in storage backends, then extra_tags=="" is converted to extra_tags==None. This is because MessageEncoder checks for the truthyness of extra_tags rather than checking it is not None."""),
("django/contrib/admin/templatetags/admin_modify.py", """"show_save_as_new" in admin can add without this permission
Description
At "django/contrib/admin/templatetags/admin_modify.py" file, line 102, I think you must put one more verification for this tag: "and has_add_permission", because "save_as_new" is a add modification."""),
("django/core/management/__init__.py", """ManagementUtility instantiates CommandParser without passing already-computed prog argument
Description
ManagementUtility goes to the trouble to parse the program name from the argv it's passed rather than from sys.argv. But then when it needs to parse --pythonpath and --settings, it uses the program name from sys.argv: parser = CommandParser(usage='%(prog)s subcommand [options] [args]', add_help=False, allow_abbrev=False). Above "%(prog)s" refers to sys.argv[0]. Instead, it should refer to self.prog_name."""),
("django/core/management/templates.py", """django-admin startapp with trailing slash in directory name results in error
Description
Bash tab-completion appends trailing slashes to directory names. django-admin startapp name directory/ results in the error: CommandError: '' is not a valid app directory. Please make sure the directory is a valid identifier.
The error is caused by line 77 of django/core/management/templates.py by calling basename() on the path with no consideration for a trailing slash: self.validate_name(os.path.basename(target), 'directory')"""),
("django/db/models/fields/__init__.py", """Cannot override get_FOO_display() in Django 2.2+.
Description
I cannot override the get_FIELD_display function on models since version 2.2. It works in version 2.1.
Example:
class FooBar(models.Model):
	foo_bar = models.CharField(_("foo"), choices=[(1, 'foo'), (2, 'bar')])
	def __str__(self):
		return self.get_foo_bar_display() # This returns 'foo' or 'bar' in 2.2, but 'something' in 2.1
	def get_foo_bar_display(self):
		return "something" """),
]

TITLES = [
    ('django/conf/global_settings.py', 'Set default FILE_UPLOAD_PERMISSION to 0o644.'),
    ('django/db/models/fields/__init__.py', 'Allow FilePathField path to accept a callable.'),
    ('django/db/models/sql/compiler.py', 'Incorrect removal of order_by clause created as multiline RawSQL'),
    ('django/forms/widgets.py', 'Merging 3 or more media objects can throw unnecessary MediaOrderConflictWarnings'),
    ('django/core/management/commands/sqlmigrate.py', "sqlmigrate wraps its output in BEGIN/COMMIT even if the database doesn't support transactional DDL"),
    ('django/utils/autoreload.py', "Autoreloader with StatReloader doesn't track changes in manage.py."),
    ('django/views/debug.py', "When DEBUG is True, raising Http404 in a path converter's to_python method does not result in a technical response"),
    ('django/core/checks/model_checks.py', 'Django throws error when different apps with different models have the same name table name.'),
    ('django/db/models/fields/__init__.py', 'Add check to ensure max_length fits longest choice.'),
    ('django/db/models/lookups.py', 'Filtering on query result overrides GROUP BY of internal query'),
    ('django/db/migrations/serializer.py', 'Migrations uses value of enum object instead of its name.'),
    ('django/utils/http.py', 'django.utils.http.parse_http_date two digit year check is incorrect'),
    ('django/db/models/lookups.py', 'Prevent using __isnull lookup with non-boolean value.'),
    ('django/db/migrations/autodetector.py', "ForeignKey's to_field parameter gets the old field's name when renaming a PrimaryKey."),
    ('django/db/models/enums.py', 'The value of a TextChoices/IntegerChoices field has a differing type'),
    ('django/db/backends/sqlite3/creation.py', 'admin_views.test_multidb fails with persistent test SQLite database.'),
    ('django/urls/resolvers.py', 'Optional URL params crash some view functions.'),
    ('django/db/models/fields/__init__.py', 'Model.get_FOO_display() does not work correctly with inherited choices.'),
    ('django/contrib/admin/utils.py', 'JSONField are not properly displayed in admin when they are readonly.'),
    ('django/db/models/sql/compiler.py', 'Inherited model doesn\'t correctly order by "-pk" when specified on Parent.Meta.ordering'),
    ('django/db/models/fields/related.py', 'Wrong hint about recursive relationship.'),
    ('django/db/models/sql/query.py', 'Django 3.0: "GROUP BY" clauses error with tricky field annotation'),
    ('django/db/models/deletion.py', 'QuerySet.Delete - inconsistent result when zero objects deleted'),
    ('django/db/models/base.py', 'Add check for fields of UniqueConstraints.'),
    ('django/db/models/query.py', 'Union queryset should raise on distinct().'),
    ('django/contrib/staticfiles/handlers.py', 'Add get_response_async for ASGIStaticFilesHandler'),
    ('django/utils/text.py', 'Make django.utils.text.slugify() strip dashes and underscores'),
    ('django/db/models/sql/query.py', 'Queryset raises NotSupportedError when RHS has filterable=False attribute.'),
    ('django/db/models/sql/compiler.py', 'Self referencing foreign key doesn\'t correctly order by a relation "_id" field.'),
    ('django/db/models/sql/query.py', 'QuerySet.none() on combined queries returns all results.'),
    ('django/core/exceptions.py', 'Allow ValidationErrors to equal each other when created identically'),
    ('django/db/migrations/autodetector.py', 'AlterOrderWithRespectTo() with ForeignKey crash when _order is included in Index().'),
    ('django/forms/models.py', 'limit_choices_to on a ForeignKey can render duplicate options in formfield'),
    ('django/contrib/sessions/backends/base.py', 'Decoding an invalid session data crashes.'),
    ('django/db/models/fields/__init__.py', 'Abstract model field should not be equal across models'),
    ('django/contrib/auth/tokens.py', "Changing user's email could invalidate password reset tokens"),
    ('django/db/models/sql/query.py', 'Upgrading 2.2>3.0 causes named tuples used as arguments to __range to error.'),
    ('django/core/management/commands/shell.py', 'shell command crashes when passing (with -c) the python code with functions.'),
    ('django/contrib/admin/options.py', 'Use Admin Inline verbose_name as default for Inline verbose_name_plural'),
    ('django/db/models/fields/json.py', 'Using __isnull=True on a KeyTransform should not match JSON null on SQLite and Oracle'),
    ('django/dispatch/dispatcher.py', 'Log exceptions handled in Signal.send_robust()'),
    ('django/db/models/base.py', 'models.W042 is raised on inherited manually specified primary key.'),
    ('django/forms/models.py', 'ModelChoiceField does not provide value of invalid choice when raising ValidationError'),
    ('django/db/models/base.py', 'Saving parent object after setting on child leads to data loss for parents with non-numeric primary key.'),
    ('django/db/models/query_utils.py', 'Q(...) & Exists(...) raises a TypeError'),
    ('django/urls/resolvers.py', "ResolverMatch.__repr__() doesn't handle functools.partial() nicely."),
    ('django/db/models/fields/__init__.py', 'DEFAULT_AUTO_FIELD subclass check fails for subclasses of BigAutoField and SmallAutoField.'),
    ('django/contrib/auth/forms.py', 'Label for ReadOnlyPasswordHashWidget points to non-labelable element.'),
    ('django/forms/boundfield.py', 'BoundWidget.id_for_label ignores id set by ChoiceWidget.options'),
    ('django/db/migrations/serializer.py', "Missing import statement in generated migration (NameError: name 'models' is not defined)"),
    ('django/forms/formsets.py', 'Add `nonform` CSS class for non form errors in FormSets'),
    ('django/db/models/sql/query.py', "QuerySet.defer() doesn't clear deferred field when chaining with only()."),
    ('django/db/models/fields/reverse_related.py', 'Missing call `make_hashable` on `through_fields` in `ManyToManyRel`'),
    ('django/db/models/fields/related.py', 'Prevent developers from defining a related_name on symmetrical ManyToManyFields'),
    ('django/contrib/admin/views/autocomplete.py', 'Refactor AutocompleteJsonView to support extra fields in autocomplete response'),
    ('django/utils/decorators.py', 'method_decorator() should preserve wrapper assignments'),
    ('django/contrib/admin/helpers.py', 'Wrong URL generated by get_admin_url for readonly field in custom Admin Site'),
    ('django/db/backends/sqlite3/schema.py', 'Remaking table with unique constraint crashes on SQLite.'),
    ('django/db/migrations/operations/models.py', 'RenameModel with db_table should be a noop.'),
    ('django/forms/widgets.py', 'Remove "for = ..." from MultiWidget\'s <label>.'),
    ('django/core/validators.py', 'URLField throws ValueError instead of ValidationError on clean'),
    ('django/db/models/fields/__init__.py', 'ExpressionWrapper for ~Q(pk__in=[]) crashes.'),
    ('django/db/migrations/recorder.py', 'MigrationRecorder does not obey db_router allow_migrate rules'),
    ('django/db/models/expressions.py', 'Subquery.as_sql() generates invalid SQL.'),
    ('django/template/autoreload.py', "Dev Server fails to restart after adding BASE_DIR to TEMPLATES[0]['DIRS'] in settings"),
    ('django/utils/functional.py', "SimpleLazyObject doesn't implement __radd__"),
    ('django/views/static.py', 'Fix handling empty string for If-Modified-Since header'),
    ('django/db/migrations/operations/models.py', 'RenameIndex() crashes when unnamed index is moving backward and forward.'),
    ('django/db/migrations/autodetector.py', 'Models migration with change field foreign to many and deleting unique together.'),
    ('django/core/management/base.py', 'Customizable management command formatters.'),
    ('django/utils/html.py', 'Add an encoder parameter to django.utils.html.json_script().'),
    ('django/core/checks/templates.py', 'check_for_template_tags_with_the_same_name with libraries in TEMPLATES'),
    ('django/core/management/commands/inspectdb.py', 'inspectdb should generate related_name on same relation links.'),
    ('django/db/backends/postgresql/client.py', 'dbshell additional parameters should be passed before dbname on PostgreSQL.'),
    ('django/forms/formsets.py', '"default.html" deprecation warning raised for ManagementForm\'s'),
    ('django/db/migrations/serializer.py', 'Support for serialization of combination of Enum flags.'),
    ('django/forms/formsets.py', 'Rendering empty_form crashes when empty_permitted is passed to form_kwargs'),
    ('django/utils/numberformat.py', 'Fix numberformat.py "string index out of range" when null'),
    ('django/forms/boundfield.py', "ModelForm fields with callable defaults don't correctly propagate default values"),
    ('django/contrib/sitemaps/__init__.py', 'Sitemaps without items raise ValueError on callable lastmod.'),
    ('django/core/cache/backends/filebased.py', 'FileBasedCache has_key is susceptible to race conditions'),
    ('django/contrib/auth/management/__init__.py', 'migrate management command does not respect database parameter when adding Permissions.'),
    ('django/db/models/sql/compiler.py', 'Multi-level FilteredRelation with select_related() may set wrong related object.'),
    ('django/db/migrations/operations/fields.py', 'Migration optimizer does not reduce multiple AlterField'),
    ('django/contrib/admin/checks.py', 'Error E108 does not cover some cases'),
    ('django/template/defaultfilters.py', 'Template filter `join` should not escape the joiner if `autoescape` is `off`'),
    ('django/db/models/sql/query.py', "QuerySet.only() doesn't work with select_related() on a reverse OneToOneField relation."),
    ('django/db/models/query.py', 'Allow returning IDs in QuerySet.bulk_create() when updating conflicts.'),
    ('django/db/migrations/serializer.py', 'Class methods from nested classes cannot be used as Field.default.'),
]


def prepare(workdir):
    """Download the sdist, unpack it and commit it into a git repository; returns its path."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         DJANGO, "-d", workdir],
        check=True,
    )
    sdist = next(f for f in os.listdir(workdir) if f.endswith(".tar.gz"))
    with tarfile.open(os.path.join(workdir, sdist)) as tar:
        tar.extractall(workdir, filter="data")
    root = os.path.join(workdir, sdist[: -len(".tar.gz")])
    git = ["git", "-C", root, "-c", "user.email=spotcheck@localhost", "-c", "user.name=spotcheck"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", DJANGO], check=True)
    return root


def rank_of(binary, root, index_dir, gold, query):
    out = subprocess.run(
        [binary, "search", root, query, "-k", "20", "--json", "--index-dir", index_dir],
        capture_output=True, text=True, check=True,
    ).stdout
    hits = json.loads(out)
    hits = hits["hits"] if isinstance(hits, dict) else hits
    paths = [h["path"] for h in hits]
    return (paths.index(gold) + 1 if gold in paths else None), (paths[0] if paths else "-")


def report(name, ranks):
    n = len(ranks)
    at = lambda k: sum(1 for r in ranks if r and r <= k) / n
    mrr = sum(1 / r for r in ranks if r) / n
    print(f"{name} ({n}): recall@1 {at(1):.3f}  recall@5 {at(5):.3f}  recall@10 {at(10):.3f}  MRR {mrr:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary", help="the airlock binary (target/release/airlock)")
    ap.add_argument("--django", help="a git repository of Django 4.2.16 (default: download it)")
    ap.add_argument("-v", action="store_true", help="print every query's rank and first hit")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="django-spotcheck-") as tmp:
        root = args.django or prepare(tmp)
        for name, group in (("issues with bodies", QUERIES), ("titles alone", TITLES)):
            ranks = []
            for gold, query in group:
                if not os.path.exists(os.path.join(root, gold)):
                    continue
                rank, first = rank_of(args.binary, root, os.path.join(tmp, "index"), gold, query)
                ranks.append(rank)
                if args.v:
                    print(f"{rank}\t{gold}\t{query.splitlines()[0][:80]}\t| {first}")
            report(name, ranks)


if __name__ == "__main__":
    main()
